"""How the page is served, by `demo --web` and by app.py (a Space): only what the page uses is open.

The page takes text, never files, so Gradio's upload route accepts nothing (`max_file_size=0`: an upload is answered
413 and not stored). Every request body is bounded by bytes before anything parses it (`BoundedBodies`): one body at
most MAX_BODY_BYTES, the bodies being received and parsed at once at most MAX_HELD_BYTES together, and the requests
waiting in the page's queue (page.QUEUE_SIZE) each hold one such body at most. Gradio writes its temporary files
(uploads, cached outputs) under GRADIO_TEMP_DIR, which it reads when it is imported: `gradio_temp_folder` gives it a
folder of its own, removed when the server stops (a GRADIO_TEMP_DIR set by the user is used as it is and left
alone). Imports no Gradio itself."""

import asyncio
import atexit
import os
import shutil
import tempfile

from ..errors import UserError

ALL_INTERFACES = ("0.0.0.0", "::", "")
# A request of the page carries at most senses.MAX_CHARACTERS characters of text: as JSON, up to 6 bytes a character
# (a control character escaped as \\u0001), with the rest of Gradio's envelope well under the remainder.
MAX_BODY_BYTES = 1 << 20
MAX_HELD_BYTES = 16 << 20  # what has arrived of the bodies being received or parsed, all requests together
# A body must have arrived whole this many seconds after its request began: a client that opens requests and sends
# nothing (or a trickle) would otherwise hold its share of MAX_HELD_BYTES for ever, and enough of them the whole page.
BODY_SECONDS = 10.0
BODILESS = {"GET", "HEAD", "OPTIONS"}


def launch_options():
    """The keyword arguments of `Blocks.launch` for the page (a new dict each time: Gradio adds to `app_kwargs`)."""
    from starlette.middleware import Middleware

    return {"max_file_size": 0, "allowed_paths": [], "app_kwargs": {"middleware": [Middleware(BoundedBodies)]}}


class BoundedBodies:
    """ASGI middleware that reads every request body itself before the app sees it: a Content-Length over
    `max_body` is answered 413 before a byte is read, a body streamed past it is answered 413 once it gets there,
    a body not whole `body_seconds` after the request began is answered 408, and a request whose arriving bytes
    would take the bodies held at once past `max_held` is answered 503 (try again later): a body holds what has
    arrived of it, so requests that send nothing hold nothing. The app gets the body whole, read from memory."""

    def __init__(self, app, max_body=MAX_BODY_BYTES, max_held=MAX_HELD_BYTES, body_seconds=BODY_SECONDS):
        self.app, self.max_body, self.max_held, self.held = app, max_body, max_held, 0
        self.body_seconds = body_seconds

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        declared = headers.get(b"content-length")
        if scope["type"] != "http" or (
            scope["method"] in BODILESS and declared is None and b"transfer-encoding" not in headers
        ):
            return await self.app(scope, receive, send)
        try:
            declared = None if declared is None else int(declared)
        except ValueError:
            return await answer(send, 400, "the Content-Length header is not a number")
        if declared is not None and declared > self.max_body:
            return await answer(send, 413, too_large(self.max_body))
        limit = self.max_body if declared is None else declared
        chunks, size = [], 0  # (what this request holds of `held`: what has arrived of its body)
        try:
            deadline = asyncio.get_running_loop().time() + self.body_seconds
            while True:
                try:
                    message = await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
                except asyncio.TimeoutError:
                    return await answer(
                        send,
                        408,
                        f"the request's body did not arrive within {self.body_seconds:g} seconds: send it again",
                    )
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                if size + len(chunk) > limit:
                    return await answer(send, 413, too_large(self.max_body))
                if self.held + len(chunk) > self.max_held:
                    return await answer(send, 503, "the page is busy with other requests: try again in a moment")
                chunks.append(chunk)
                size += len(chunk)
                self.held += len(chunk)
                if not message.get("more_body"):
                    break
            messages = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
            del chunks

            async def replay():
                return messages.pop() if messages else await receive()

            await self.app(scope, replay, send)
        finally:
            self.held -= size


def too_large(limit):
    return f"the request is over {limit:,} bytes, the most one request of this page may send: give less text"


async def answer(send, status, message):
    """A plain-text response `status` saying `message` (the request is not passed on)."""
    body = message.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"%d" % len(body)),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def import_gradio():
    """Gradio, or one UserError line saying how to install it."""
    try:
        import gradio
    except ImportError as e:
        raise UserError(
            f'the web page needs Gradio ({e.name} is not installed): pip install "elmo-transformers[demo]"'
        ) from None
    return gradio


def gradio_temp_folder():
    """Point GRADIO_TEMP_DIR at a new temporary folder (before Gradio is imported), removed at exit; returns it, or
    None when the user set GRADIO_TEMP_DIR."""
    if os.environ.get("GRADIO_TEMP_DIR"):
        return None
    folder = tempfile.mkdtemp(prefix="elmo-demo-gradio-")
    os.environ["GRADIO_TEMP_DIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def build_page(model):
    """The page for `model` (a folder or Hub repo id), started as `demo --web` and app.py both start it: Gradio's
    temporary folder set before Gradio is imported, Gradio imported (or one UserError line), ELMo registered with
    the Auto classes, transformers' progress bars off, the model loaded once (`page.build`, one ModelError line
    when it cannot be used)."""
    gradio_temp_folder()
    import_gradio()
    from transformers.utils import logging

    from .. import register
    from . import page

    register()
    logging.disable_progress_bar()
    return page.build(model)


def public_warning(host):
    """What to tell the user when `host` serves on every network interface (anyone who can reach this machine can
    use the page and its CPU time), else None."""
    if host in ALL_INTERFACES:
        return (
            f"warning: serving on every network interface ({host or 'all'}): anyone who can reach this machine "
            "can use the page; host 127.0.0.1 serves this machine only"
        )
    return None
