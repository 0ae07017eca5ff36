"""`elmo-transformers demo`: what ELMo is for, in one command: the same word gets different vectors in different
contexts.

    elmo-transformers demo ["A sentence ." "Another sentence ." ...] [--model DIR_OR_REPO]
    elmo-transformers demo --web [--model DIR_OR_REPO] [--host 127.0.0.1] [--port 7860]

Embeds the sentences (words split on whitespace), picks a word that occurs in several of them and shows how similar
its ELMo vectors are, pair by pair, and which uses ELMo groups together (each use joins the use nearest to it): uses
in the same sense come out closer than uses in different senses. When the sentences share no such word (one
sentence, say), the built-in examples about "bank" (river bank, the bank that lends money) are added. Without
--model it uses the model shipped with the package (`elmo_transformers.DEFAULT_MODEL`).

--web serves the same in a web page instead (Gradio; `pip install "elmo-transformers[demo]"`), with pictures of each
biLM layer and, for a language-model folder, fill-mask and each word's log-probability.
"""

import argparse
import errno
import os
import socket
import sys

from ..errors import UserError
from ..models import DEFAULT_MODEL
from . import option


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="elmo-transformers demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sentences", nargs="*", help="whitespace-tokenized sentences (default: examples about bank)")
    parser.add_argument(
        "--model",
        default=str(DEFAULT_MODEL),
        help="an ELMo folder, a Hub repo id, or `default` (the shipped model, the default)",
    )
    web = parser.add_argument_group("web page")
    web.add_argument("--web", action="store_true", help="serve the demo as a web page (Gradio) until Ctrl+C")
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1: this machine only; 0.0.0.0 for every network interface)",
    )
    web.add_argument("--port", type=int, default=7860, help="port to serve on (default 7860)")
    args = parser.parse_args(argv)
    if args.web and args.sentences:
        parser.error("--web takes no sentences: type them into the page")
    if not args.web and (args.host, args.port) != ("127.0.0.1", 7860):
        parser.error("--host and --port go with --web")
    if not 1 <= args.port <= 65535:
        parser.error(f"--port {args.port}: a port is a number from 1 to 65535")
    if args.web:
        return serve(args)
    from ..demo import model as demo_model
    from ..demo.senses import EXAMPLES, MIN_LETTERS, most_repeated, sense_groups, word_uses

    sentences = [s for s in args.sentences if s.split()] or EXAMPLES
    if most_repeated(sentences) is None:
        print(f"No word of {MIN_LETTERS}+ letters occurs twice in your sentences; adding the built-in examples.\n")
        sentences = sentences + [s for s in EXAMPLES if s not in sentences]
    with option("--model", args.model):
        loaded = demo_model.load(args.model, language_model=False)
    uses = word_uses(loaded.embedder, sentences, most_repeated(sentences))
    n = len(uses.places)
    elmo = uses.similarities["mix"]
    print(
        f"ELMo gives every word a {loaded.embedder.model.config.hidden_size}-d vector computed from its whole sentence."
    )
    print(f'The word "{uses.word}" in {n} places:')
    for use in range(n):
        print(f"  {uses.label(use)}")
    pairs = sorted(((a, b) for a in range(n) for b in range(a + 1, n)), key=lambda pair: -elmo[pair])
    print("\nCosine similarity of its ELMo vectors (1 = same direction), most similar pair first:")
    for a, b in pairs:
        print(f"  [{a + 1}] and [{b + 1}]: {elmo[a, b]:.2f}")
    if n > 2:
        print(f"Grouped by ELMo (each use joined to its most similar use): {' '.join(sense_groups(elmo))}")
    context_free = uses.similarities["layer 0"].min()
    print(
        f"\nWithout context (biLM layer 0, the char CNN) every pair scores {context_free:.2f}: one vector per "
        "spelling.\nELMo's vectors depend on the sentence, so uses in the same sense tend to be closer: a "
        "tendency, whose\nstrength depends on the model (its card gives a word-sense score)."
    )


def serve(args):
    """The web page: the port is checked and the model loaded before Gradio starts, each failing in one line."""
    from ..demo import server

    check_port(args.host, args.port)
    with option("--model", args.model):
        blocks = server.build_page(args.model)
    warning = server.public_warning(args.host)
    if warning:
        print(warning, file=sys.stderr)
    launch(blocks, args.host, args.port, server.launch_options())


def check_port(host, port):
    """Refuse, in one line, an address this machine cannot serve on: an unknown --host, a --port in use."""
    try:
        socket.getaddrinfo(host, port)
    except OSError as e:
        raise UserError(
            f"--host {host}: not a name or address of this machine ({e.strerror or e}): give an address "
            "such as 127.0.0.1 (this machine only) or 0.0.0.0 (every network interface)"
        ) from None
    try:
        socket.create_server((host, port)).close()  # as the server binds: SO_REUSEADDR, so TIME_WAIT is no conflict
    except OSError as e:  # create_server adds the address to strerror; os.strerror is the reason alone
        raise bind_error(host, port, e) from None


def bind_error(host, port, error):
    """The one line for an address that cannot be bound, naming the option at fault: --port when the port is taken
    (or needs privileges), --host when the address is not one of this machine's."""
    reason = os.strerror(error.errno) if error.errno and error.errno > 0 else error.strerror or str(error)
    if error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return UserError(
            f"--host {host}: cannot serve on {host}:{port} ({reason}): not an address of this machine; "
            "give 127.0.0.1 (this machine only) or 0.0.0.0 (every network interface)"
        )
    return UserError(
        f"--port {port}: cannot serve on {host}:{port} ({reason}): stop what uses it, or give another --port"
    )


def launch(page, host, port, options):
    """Serve `page` on host:port, print its address, and serve until Ctrl+C."""
    try:
        page.launch(server_name=host, server_port=port, quiet=True, prevent_thread_lock=True, **options)
    except OSError as e:  # taken between check_port and here
        raise UserError(f"cannot serve on {host}:{port} ({e}): give another --port") from None
    print(f"ELMo demo page: {page.local_url} (Ctrl+C stops it)", flush=True)
    page.block_thread()  # SIGTERM stops it as Ctrl+C does (cli.main): Gradio closes the server, its folder goes
