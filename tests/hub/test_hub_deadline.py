"""Every Hub call of the commands has a deadline (hub/deadline.py), and SIGTERM cleans up as Ctrl+C does.

The Hub here is a loopback server that accepts connections and never answers (it stops by itself); the commands run
in their own processes with HF_ENDPOINT pointing at it: `push` and `--model OWNER/NAME` must end in one line, the
temporary upload folder removed."""

import signal
import socket
import subprocess
import threading
import time

import pytest
from conftest import command, command_env

pytestmark = pytest.mark.slow  # subprocesses that load torch: seconds


@pytest.fixture
def silent_hub():
    """(its URL, the number of connections accepted so far): a server that accepts and never answers, for at most
    120 s."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def serve():
        end = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < end:
            try:
                accepted.append(server.accept()[0])  # held open, never answered
            except TimeoutError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def run(args, hub, tmp_path, timeout=120, **variables):
    env = command_env(HF_ENDPOINT=hub, HF_TOKEN="hf_test", TMPDIR=str(tmp_path), **variables)
    env.pop("HF_HUB_OFFLINE", None)
    start = time.monotonic()
    result = subprocess.run(command(*args), env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - start


def test_push_to_a_hub_that_never_answers_ends_in_one_line(silent_hub, tmp_path):
    hub, accepted = silent_hub
    result, seconds = run(["push", "default", "me/elmo-demo"], hub, tmp_path, HF_HUB_DOWNLOAD_TIMEOUT="2")
    assert result.returncode == 1 and accepted, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot upload to me/elmo-demo on http://127.0.0.1:") and "timed out" in last, last
    assert seconds < 90
    assert not list(tmp_path.glob("elmo-upload-*"))


def test_a_hub_model_name_that_never_answers_is_the_documented_line(silent_hub, tmp_path):
    hub, accepted = silent_hub
    result, seconds = run(["demo", "--model", "someone/elmo-x"], hub, tmp_path, HF_HUB_DOWNLOAD_TIMEOUT="2")
    assert result.returncode == 1 and accepted
    assert result.stderr == (
        "error: --model someone/elmo-x: no such folder, and the Hub cannot be reached (timed "
        "out): give a local folder\n"
    )
    assert seconds < 60


def test_sigterm_during_an_upload_removes_the_upload_folder(silent_hub, tmp_path):
    hub, accepted = silent_hub
    env = command_env(HF_ENDPOINT=hub, HF_TOKEN="hf_test", TMPDIR=str(tmp_path))  # the default deadline: 60 s
    env.pop("HF_HUB_OFFLINE", None)
    process = subprocess.Popen(
        command("push", "default", "me/elmo-demo"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 90
        while not accepted and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        assert accepted and process.poll() is None, "push never reached the Hub"
        assert len(list(tmp_path.glob("elmo-upload-*"))) == 1  # the full copy of the model, waiting to upload
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == (
        "interrupted by SIGTERM: elmo-transformers push stopped before it finished"
    )
    assert not list(tmp_path.glob("elmo-upload-*"))


def test_requests_get_the_deadline_unless_they_name_one(monkeypatch):
    """The hook fills only the waits a call left unlimited (huggingface_hub's downloads name their own)."""
    import httpx2

    from elmo_transformers.hub.deadline import HUB_TIMEOUT, with_deadline

    monkeypatch.delenv("HF_HUB_DOWNLOAD_TIMEOUT", raising=False)
    unlimited = httpx2.Request("GET", "http://127.0.0.1/", extensions={"timeout": httpx2.Timeout(None).as_dict()})
    with_deadline(unlimited)
    assert unlimited.extensions["timeout"] == dict.fromkeys(("connect", "read", "write", "pool"), HUB_TIMEOUT)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "7")
    named = httpx2.Request("GET", "http://127.0.0.1/", extensions={"timeout": httpx2.Timeout(3.0).as_dict()})
    with_deadline(named)
    assert named.extensions["timeout"] == dict.fromkeys(("connect", "read", "write", "pool"), 3.0)
    with_deadline(unlimited := httpx2.Request("GET", "http://127.0.0.1/"))
    assert unlimited.extensions["timeout"]["read"] == 7.0


def test_the_client_with_deadlines_keeps_huggingface_hubs_own_hooks(monkeypatch):
    """use_deadlines builds the client through huggingface_hub's public API: its own request hook still runs (offline
    mode refuses a request), the deadline comes once however often a command sets it, and redirects are followed."""
    from huggingface_hub import constants, get_session
    from huggingface_hub.errors import OfflineModeIsEnabled

    from elmo_transformers.hub.deadline import use_deadlines, with_deadline

    use_deadlines()
    use_deadlines()
    client = get_session()
    hooks = client.event_hooks["request"]
    assert hooks.count(with_deadline) == 1 and hooks[-1] is with_deadline, hooks
    assert client.follow_redirects
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OfflineModeIsEnabled):
        client.get("http://127.0.0.1:9/")
