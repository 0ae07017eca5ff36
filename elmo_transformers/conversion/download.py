"""The download of one published file into a cache folder, through huggingface_hub's HTTP client (its offline mode,
timeouts and progress bars): locked per file, resumed and retried within bounds, and given its cached name only once
it is complete and its caller's check accepts it. What users see of it: docs/coming-from-allennlp-and-tf-hub.md.

huggingface_hub's `http_get` is not used: it resets its count of retries whenever bytes arrive, so a server that cuts
every transfer at the same byte is retried forever; here `ATTEMPTS` attempts in a row that bring no new byte end it.
"""

import glob
import importlib
import os
import secrets
import shutil
import time

import huggingface_hub
from huggingface_hub import constants
from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import WeakFileLock, get_session, tqdm

from ..errors import first_line

# huggingface_hub's HTTP client, whose errors its session raises: httpx2 from huggingface_hub 2.0 on, httpx before.
httpx = importlib.import_module("httpx2" if int(huggingface_hub.__version__.split(".")[0]) >= 2 else "httpx")

ATTEMPTS = 5  # attempts in a row without a new byte before a download gives up (huggingface_hub's http_get: 5)
MIN_BYTES = 1024  # a transfer bringing fewer bytes in HF_HUB_DOWNLOAD_TIMEOUT seconds has stalled
RETRY_WAIT = 1.0  # seconds between attempts, as http_get waits


def download(url, path, check):
    """(`path`, the URL its copy came from): downloaded from `url` and passed through `check` (which raises for a
    file that is not the expected one) unless a copy is there already (only checked, complete files get this name).
    One run at a time downloads a given file; the others wait and reuse its copy."""
    source = path.with_name(path.name + ".source")
    with WeakFileLock(path.with_name(path.name + ".lock")):
        if path.is_file() and source.is_file():
            return path, source.read_text(encoding="utf-8").strip()
        # Under the lock no other run writes this file: a temporary file of it (or of its .source) is a killed
        # run's (kill -9).
        for stale in path.parent.glob(f"{glob.escape(path.name)}.*.incomplete"):
            stale.unlink(missing_ok=True)
        partial = temporary_file(path)
        try:
            with open(partial, "r+b") as file:
                fetch(url, file, path.name)
            check(partial)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)  # an interrupted or refused download leaves nothing behind
        record = temporary_file(source)  # after the file: a file without its record is downloaded again
        record.write_text(url, encoding="utf-8")
        os.replace(record, source)
    return path, url


def temporary_file(path):
    """A new empty file beside `path` whose name no other run uses and no run takes for a complete file, created
    with the permissions of any file this process creates (the umask's; mkstemp's 0600 would hide a cache in a
    group-shared HF_HOME from the group, which huggingface_hub's own downloads do not)."""
    name = path.with_name(f"{path.name}.{secrets.token_hex(8)}.incomplete")
    os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    return name


class DownloadError(Exception):
    """A file cannot be downloaded: the message names the URL and the last failure; the caller adds what to do."""


def fetch(url, file, name):
    """Write `url`'s body into the empty `file`, resuming a cut transfer where the server allows it, or
    DownloadError naming the URL and the last failure."""
    session, size, furthest, failures = get_session(), None, 0, 0
    while True:
        try:
            if size is None:
                size = content_length(session, url)
                free = shutil.disk_usage(os.path.dirname(file.name)).free
                if size > free:
                    raise DownloadError(
                        f"cannot download {url}: its {size:,} bytes do not fit in the {free:,} free "
                        "on the cache's disk (make room, or set HF_HOME to a larger disk)"
                    )
            with tqdm(total=size, unit="B", unit_scale=True, desc=name) as bar:
                transfer(session, url, file, size, bar)
            return
        except OfflineModeIsEnabled:
            raise DownloadError(f"cannot download {url}: HF_HUB_OFFLINE is set (unset it)") from None
        except (httpx.TransportError, httpx.HTTPStatusError, ConnectionError, TimeoutError) as e:
            reason = failure(e, size is None)
            if isinstance(e, httpx.HTTPStatusError) and e.response.status_code not in (408, 429, 500, 502, 503, 504):
                raise DownloadError(f"cannot download {url} ({reason})") from None
            got = file.tell()
            failures = 0 if got > furthest and not isinstance(e, TimeoutError) else failures + 1
            furthest = max(furthest, got)
            if failures >= ATTEMPTS:
                raise DownloadError(
                    f"cannot download {url} ({reason}; {ATTEMPTS} attempts in a row brought no new data)"
                ) from None
            time.sleep(RETRY_WAIT)


def content_length(session, url):
    """The size of `url`'s file, from a HEAD request (huggingface_hub's metadata request and its timeout)."""
    head = session.head(url, follow_redirects=True, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    head.raise_for_status()
    try:
        return int(head.headers["Content-Length"])
    except (KeyError, ValueError):
        raise DownloadError(f"cannot download {url}: the server gives no file size (Content-Length)") from None


def failure(error, metadata):
    """What went wrong in an attempt, in words (which timeout, for a timeout)."""
    if isinstance(error, httpx.TimeoutException):
        variable = "HF_HUB_ETAG_TIMEOUT" if metadata else "HF_HUB_DOWNLOAD_TIMEOUT"
        return f"no answer within {getattr(constants, variable)} s, set by {variable}"
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}"
    return first_line(error)


def transfer(session, url, file, size, bar):
    """One GET of `url` into `file`, from the bytes `file` already holds where the server honours a range; raises
    ConnectionError when the transfer ends early, TimeoutError when it stalls (under MIN_BYTES a
    HF_HUB_DOWNLOAD_TIMEOUT)."""
    have, window = file.tell(), constants.HF_HUB_DOWNLOAD_TIMEOUT
    headers = {"Range": f"bytes={have}-"} if have else {}
    with session.stream("GET", url, headers=headers, follow_redirects=True, timeout=window) as response:
        response.raise_for_status()
        if response.status_code != 206 or not response.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            file.seek(0)  # the whole file again (a server that ignores ranges)
            file.truncate()
            if response.status_code == 206:
                raise ConnectionError("the server answered another range than the one asked for")
        start, got = time.monotonic(), 0
        for chunk in response.iter_bytes():
            file.write(chunk)
            bar.update(file.tell() - bar.n)
            if file.tell() > size:
                raise ConnectionError(f"the server sent more than the {size:,} bytes it announced")
            got += len(chunk)
            if time.monotonic() - start >= window:
                if got < MIN_BYTES:
                    raise TimeoutError(
                        f"the transfer stalled: under {MIN_BYTES:,} bytes in {window} s, set by HF_HUB_DOWNLOAD_TIMEOUT"
                    )
                start, got = time.monotonic(), 0
    if file.tell() != size:
        raise ConnectionError(f"the transfer ended at byte {file.tell():,} of {size:,}")
