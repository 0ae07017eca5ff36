"""How the page is served, by `demo --web` and by app.py (a Space): only what the page uses is open.

The page takes text, never files, so Gradio's upload route accepts nothing (`max_file_size=0`: an upload is answered
413 and not stored). Gradio writes its temporary files (uploads, cached outputs) under GRADIO_TEMP_DIR, which it
reads when it is imported: `gradio_temp_folder` gives it a folder of its own, removed when the server stops (a
GRADIO_TEMP_DIR set by the user is used as it is and left alone).
Imports no Gradio itself.
"""

import atexit
import os
import shutil
import tempfile

from ..errors import UserError

LAUNCH_OPTIONS = {"max_file_size": 0, "allowed_paths": []}
ALL_INTERFACES = ("0.0.0.0", "::", "")


def import_gradio():
    """Gradio, or one UserError line saying how to install it."""
    try:
        import gradio
    except ImportError as e:
        raise UserError(f"the web page needs Gradio ({e.name} is not installed): "
                        'pip install "elmo-transformers[demo]"') from None
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
        return (f"warning: serving on every network interface ({host or 'all'}): anyone who can reach this machine "
                "can use the page; --host 127.0.0.1 serves this machine only")
    return None
