"""Every Hub call of the commands has a deadline. huggingface_hub's HTTP client waits for ever where a call names no
timeout of its own (`timeout=None`: `model_info`, `create_repo`, the upload's commit), so a Hub, proxy or mirror that
accepts a connection and never answers would hang `push` and `--model OWNER/NAME` with no output.
`use_deadlines()` gives each request of that client a limit on each wait, connecting, sending or receiving, where
the call set none (huggingface_hub passes `timeout=None` explicitly, which overrides a client's default, so the limit
is set on the request itself, by a request hook): HF_HUB_DOWNLOAD_TIMEOUT seconds where the variable is set
(huggingface_hub's own variable for its downloads), else `HUB_TIMEOUT`. Calls that name their own timeout (file
downloads) keep it. The client is configured through huggingface_hub's public API: `set_client_factory`, its way to
configure the client, with the request hooks of its own client (`get_session()`: offline mode, request ids) kept."""

import os

from huggingface_hub import get_session, set_client_factory

HUB_TIMEOUT = 60.0  # seconds: a commit of large files may keep the Hub busy a while before it answers


def hub_timeout():
    """Seconds one wait on the Hub may take."""
    value = os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "")
    try:
        return float(value) if float(value) > 0 else HUB_TIMEOUT
    except ValueError:
        return HUB_TIMEOUT


def with_deadline(request):
    """A request hook: every wait the request has no limit for gets `hub_timeout()`."""
    limits = request.extensions.get("timeout") or {}
    seconds = hub_timeout()
    request.extensions["timeout"] = {wait: limits.get(wait) or seconds for wait in ("connect", "read", "write", "pool")}


def use_deadlines():
    """From now on every client huggingface_hub makes in this process has the deadline: a client like its own
    (`get_session()`'s class, request hooks and redirects), with `with_deadline` as the last request hook."""
    own = get_session()
    hooks = [hook for hook in own.event_hooks["request"] if hook is not with_deadline]

    def client_with_deadline():
        return type(own)(
            event_hooks={"request": [*hooks, with_deadline]}, follow_redirects=own.follow_redirects, timeout=None
        )

    set_client_factory(client_with_deadline)
