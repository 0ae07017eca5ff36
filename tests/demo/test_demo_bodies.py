"""The page bounds request bodies by bytes before anything parses them (demo/server.py, `BoundedBodies`): 20
concurrent requests of 40 MB each took the server from 0.77 GB to 2.57 GB (it kept 1.41 GB)."""

import asyncio
import socket

import pytest

from elmo_transformers.demo.server import MAX_BODY_BYTES, BoundedBodies


def request(body_chunks, length="declared", method="POST"):
    """(scope, receive) of a request whose body arrives in `body_chunks`; Content-Length given unless None."""
    size = sum(map(len, body_chunks))
    headers = [] if length is None else [(b"content-length", str(size if length == "declared" else length).encode())]
    if length is None:
        headers.append((b"transfer-encoding", b"chunked"))
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(body_chunks) - 1} for i, c in enumerate(body_chunks)
    ] or [{"type": "http.request", "body": b"", "more_body": False}]
    sent = {"read": 0}

    async def receive():
        sent["read"] += 1
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return {"type": "http", "method": method, "headers": headers}, receive, sent


def call(middleware, scope, receive):
    """The status the middleware (or its app) answered and the body the app read."""
    answered = {}

    async def send(message):
        if message["type"] == "http.response.start":
            answered["status"] = message["status"]
        else:
            answered["text"] = answered.get("text", b"") + message.get("body", b"")

    asyncio.run(middleware(scope, receive, send))
    return answered


class App:
    """An app that reads its request's body whole, as FastAPI does before parsing, and answers 200."""

    def __init__(self):
        self.bodies = []

    async def __call__(self, scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def test_a_body_declared_over_the_limit_is_refused_before_a_byte_is_read():
    app = App()
    scope, receive, read = request([b"x" * 10], length=40_000_000)
    answered = call(BoundedBodies(app), scope, receive)
    assert answered["status"] == 413 and read["read"] == 0 and app.bodies == []
    assert f"over {MAX_BODY_BYTES:,} bytes" in answered["text"].decode()


def test_a_body_streamed_past_the_limit_is_refused_there():
    app = App()
    chunk = b"\n" * 65536  # blank lines: bytes all the same
    scope, receive, read = request([chunk] * 40, length=None)
    answered = call(BoundedBodies(app), scope, receive)
    assert answered["status"] == 413 and app.bodies == []
    assert read["read"] == MAX_BODY_BYTES // len(chunk) + 1  # it stopped reading at the limit
    scope, receive, _ = request([b"x" * 10], length=5)  # more than it declared
    assert call(BoundedBodies(app), scope, receive)["status"] == 413


def test_a_body_within_the_limit_reaches_the_app_whole():
    app = App()
    scope, receive, _ = request([b"a" * 1000, b"b" * 1000])
    assert call(BoundedBodies(app), scope, receive)["status"] == 200
    scope, receive, _ = request([b"c" * 10], length=None)
    assert call(BoundedBodies(app), scope, receive)["status"] == 200
    scope, receive, _ = request([], length=None, method="GET")  # no body: passed on as it is
    scope["headers"] = []
    assert call(BoundedBodies(app), scope, receive)["status"] == 200
    assert app.bodies == [b"a" * 1000 + b"b" * 1000, b"c" * 10, b""]


def test_the_bodies_held_at_once_are_bounded():
    """Requests whose bodies are being read or parsed hold at most max_held bytes together: past that, 503."""

    class SlowApp(App):
        async def __call__(self, scope, receive, send):
            await asyncio.sleep(0.2)  # parsing, while the others arrive
            await super().__call__(scope, receive, send)

    middleware, statuses = BoundedBodies(SlowApp(), max_body=1000, max_held=3000), []

    async def one():
        scope, receive, _ = request([b"x" * 1000])
        answered = {}

        async def send(message):
            answered.setdefault("status", message.get("status"))

        await middleware(scope, receive, send)
        statuses.append(answered["status"])

    async def many():
        await asyncio.gather(*(one() for _ in range(5)))

    asyncio.run(many())
    assert sorted(statuses) == [200, 200, 200, 503, 503] and middleware.held == 0
    asyncio.run(one())  # once they are done, room again
    assert statuses[-1] == 200


def test_requests_whose_bodies_never_arrive_hold_nothing():
    """Clients that open requests and send nothing held the page's room for bodies (1 MiB each, reserved up front)
    for as long as they stayed open, and again when reopened every 10 s (16 idle chunked POSTs: every other request
    answered 503): a body holds only what has arrived of it, so the others are served, and past `body_seconds`
    each idle one is answered 408."""
    app = App()
    middleware = BoundedBodies(app, max_body=1000, max_held=3000, body_seconds=0.2)

    async def idle():
        await asyncio.sleep(3600)  # a client that sends no byte

    async def one(receive):
        answered = {}

        async def send(message):
            answered.setdefault("status", message.get("status"))

        await middleware(
            {"type": "http", "method": "POST", "headers": [(b"transfer-encoding", b"chunked")]}, receive, send
        )
        return answered["status"]

    async def scenario():
        idle_ones = [asyncio.create_task(one(idle)) for _ in range(3)]  # (reserving 1000 each took all the room)
        await asyncio.sleep(0.05)
        busy = await one(request([b"x" * 10], length=None)[1])
        statuses = await asyncio.gather(*idle_ones)
        served = await one(request([b"y" * 10], length=None)[1])
        return busy, statuses, served

    busy, statuses, served = asyncio.run(scenario())
    assert busy == 200 and statuses == [408, 408, 408] and served == 200 and middleware.held == 0
    assert app.bodies == [b"x" * 10, b"y" * 10]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_served_page_refuses_a_large_body_and_answers_the_next_request(lm_dir):
    pytest.importorskip("gradio", reason="the web page needs Gradio (pip install '.[demo]')")
    import httpx
    from gradio_client import Client

    from elmo_transformers.demo import page, server

    blocks = page.build(str(lm_dir))
    blocks.launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        quiet=True,
        prevent_thread_lock=True,
        **server.launch_options(),
    )
    try:
        url = blocks.local_url
        big = b'{"data": ["' + b"\\n" * 20_000_000 + b'", "bank", "mix"], "fn_index": 0, "session_hash": "x"}'
        response = httpx.post(url + "gradio_api/queue/join", content=big, timeout=60)
        assert response.status_code == 413 and "the most one request of this page may send" in response.text
        client = Client(url, verbose=False)
        message = client.predict("He sat on the bank .\nThe bank lends money .", "bank", "mix", fn_index=0)[0]
        assert '"bank", 2 uses' in message
    finally:
        blocks.close()


@pytest.mark.slow
def test_an_error_leaves_no_empty_table_behind(lm_dir):
    """After an error the tables are hidden, not left as an empty header (nor the error shown as a table row), and
    the next good request shows them again."""
    gr = pytest.importorskip("gradio", reason="the web page needs Gradio (pip install '.[demo]')")
    from elmo_transformers.demo import page

    blocks = page.build(str(lm_dir))
    handlers = {f.fn.__name__: f.fn for f in blocks.fns.values() if f.fn is not None}
    message, table, *_ = handlers["on_compare"]("The bank .", "castle", "mix")
    assert "occurs in no sentence" in message and isinstance(table, gr.Dataframe) and not table.visible
    message, table, *_ = handlers["on_compare"]("The bank .\nA bank .", "bank", "mix")
    assert table.visible and '"bank", 2 uses' in message
    message, picture, table = handlers["on_score"]("")
    assert "no text given" in message and picture is None and not table.visible
    message, picture, table = handlers["on_score"]("the <mask> sat .")
    assert message == "" and picture is not None and table.visible


def test_every_event_of_the_page_waits_in_one_line(lm_dir):
    """Gradio gives each listener a queue of its own: the first visit's example (page load) and the user's Compare ran
    side by side, and the older answer could arrive last and replace the newer one (a table of other numbers than
    the model's for the sentences given). Every event of the page is in one concurrency group of one, so requests
    run alone, in the order they came."""
    pytest.importorskip("gradio", reason="the web page needs Gradio (pip install '.[demo]')")
    from elmo_transformers.demo import page

    blocks = page.build(str(lm_dir))
    events = list(blocks.fns.values())
    assert len(events) >= 10  # compare (click, Enter, load), the layer, fill-mask (3) and the scores (3)
    assert {event.concurrency_id for event in events} == {page.ONE_QUEUE}
    assert {event.concurrency_limit for event in events} <= {"default", 1}
    assert blocks._queue.default_concurrency_limit == 1
