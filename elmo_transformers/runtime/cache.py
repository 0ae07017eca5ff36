"""Exports made on first use (`runtime="onnxruntime"`, `embed --runtime onnxruntime`), as optimum's
`ORTModel.from_pretrained(..., export=True)` does, kept in the Hugging Face cache (HF_HOME/elmo-transformers/onnx/).

The rules:
- An entry is keyed by the model's fingerprint in the dtype (`ModelFolder.fingerprint`: its weight files, its
  config's fields that decide the numbers (`options_elmo.NUMBERS_FIELDS`, which the graph records too), its
  tokenizer's rules and vocabularies, the dtype; what `embed --resume` compares too): a changed model, or another
  tokenization of the same weights, never reuses a stale graph; a change of a field that does not decide the
  numbers (a training setting, `float_kernel`) reuses it.
- An entry records its key and its own fingerprint (KEY_FILE), and is checked against both and its graph against the
  entry's dtype (the graph's own metadata) before use: an entry that another model's export replaced, or that was
  cut or edited, is exported again (with a warning). A file where an entry belongs is not the cache's: it is named,
  and left to the user to remove.
- An entry that checks out is used without a lock, so a read-only cache that holds it works.
- Exporting takes a file lock (filelock), so that two processes starting at once export once; a process that finds
  another exporting says so and waits at most LOCK_WAIT_SECONDS. The staging folders of killed exports, which no
  lock holds, are removed before the next export.
- The first use says that it exports, and how long it took.
"""

import json
import logging
import os
import shutil
import time

from ..errors import UserError
from ..model_folder import ModelFolder, open_model

logger = logging.getLogger(__name__)

KEY_FILE = "elmo-export-key.json"  # in each entry: its key and its own fingerprint
LOCK_WAIT_SECONDS = 600  # another process's export: longer than exporting the largest published ELMo takes


def cache_root():
    from huggingface_hub import constants

    return os.path.join(constants.HF_HOME, "elmo-transformers", "onnx")


def export_folder(source, dtype):
    """Where the cache keeps `source`'s (a ModelFolder) export in `dtype`, and the key that names it."""
    key = f"{source.fingerprint(dtype)}-{dtype}"
    return os.path.join(cache_root(), key), key


def checked_entry(folder, key, dtype):
    """The ModelFolder of the entry `folder` (an export in `dtype`) when it holds an export recorded under `key`
    whose fingerprint is the one it recorded and whose graph is in `dtype`; None when there is no entry; a string
    saying what is wrong with a damaged one; a UserError for a file where the entry belongs."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise UserError(
            f"{folder}: a file stands where the export cache keeps this model's export (a folder), and "
            "the cache never removes what it did not make: remove it, then run again",
            folder,
        )
    if not os.path.isdir(folder):
        return None
    try:
        entry = open_model(folder, local=True)
        recorded = entry.documents.get(KEY_FILE)
        fingerprint = entry.fingerprint(dtype)
    except (OSError, ValueError, UserError) as e:
        return f"it cannot be read ({type(e).__name__})"
    if not isinstance(recorded, dict) or recorded.get("key") != key:
        return "it was stored for another model"
    if recorded.get("fingerprint") != fingerprint or not entry.is_export:
        return "its files changed after the export"
    exported_in = graph_dtype(entry)
    if exported_in != dtype:
        return f"its graph's dtype is {exported_in or 'unreadable'}, the entry's {dtype}"
    return entry


def graph_dtype(entry):
    """The dtype an exported ModelFolder's graph records in its metadata (as `export onnx` wrote it), read without
    its external weights; None for a graph that cannot be parsed."""
    from .onnx import check_onnx_installed

    check_onnx_installed(("onnx",), "runtime onnxruntime on a PyTorch folder (its export cache)", entry.path)
    import onnx
    from google.protobuf.message import DecodeError

    from .onnx_config import DTYPE_KEY

    try:
        graph = onnx.load(entry.file("model.onnx"), load_external_data=False)
    except (OSError, DecodeError):
        return None
    return next((prop.value for prop in graph.metadata_props if prop.key == DTYPE_KEY), None)


def cached_export(source, dtype, load_float32):
    """The ModelFolder of `source`'s (a ModelFolder) export in `dtype` (float32 or int8), exported on first use from
    the float32 model `load_float32()` gives (model, tokenizer)."""
    folder, key = export_folder(source, dtype)
    entry = checked_entry(folder, key, dtype)
    if isinstance(entry, ModelFolder):
        return entry
    from filelock import FileLock, Timeout

    lock = FileLock(folder + ".lock")
    try:
        os.makedirs(cache_root(), exist_ok=True)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            logger.warning(
                f"another process is exporting {source.name} to ONNX ({dtype}) into the export cache "
                f"({folder}): waiting for it, at most {LOCK_WAIT_SECONDS} s"
            )
            try:
                lock.acquire(timeout=LOCK_WAIT_SECONDS)
            except Timeout:
                raise UserError(
                    f"{source.name}: another process has been exporting it into the export cache for "
                    f"{LOCK_WAIT_SECONDS} s (lock {folder}.lock): wait for it to finish, or stop it and "
                    "run again",
                    source.name,
                ) from None
        try:
            return _export_locked(source, dtype, load_float32, folder, key)
        finally:
            lock.release()
    except OSError as e:
        raise UserError(
            f"{source.name}: the ONNX export cache {cache_root()} cannot be written: "
            f"{e.strerror or e}: free some space there, or point HF_HOME to a writable folder",
            source.name,
        ) from None


def _export_locked(source, dtype, load_float32, folder, key):
    """`cached_export` once the lock is held: the entry as another process may have just made it, else exported
    now (a damaged entry removed first: the cache made it)."""
    from ..output_paths import remove_stale_staging, write_folder_atomically
    from .onnx_export import write_export

    entry = checked_entry(folder, key, dtype)
    if isinstance(entry, ModelFolder):
        return entry
    remove_stale_staging(cache_root())  # killed exports of any model
    if entry is not None:
        logger.warning(f"the export cache's entry {folder} is damaged ({entry}): exporting {source.name} again")
        shutil.rmtree(folder)
    logger.warning(
        f"exporting {source.name} to ONNX ({dtype}) for onnxruntime, once: it is kept in the export cache {folder}"
    )
    start = time.perf_counter()
    model, tokenizer = load_float32()

    def write(staging):
        write_export(model, tokenizer, staging, dtype, source.name)
        record = {"key": key, "fingerprint": open_model(staging, local=True).fingerprint(dtype)}
        with open(os.path.join(staging, KEY_FILE), "w", encoding="utf-8") as f:
            json.dump(record, f)

    write_folder_atomically(write, folder)
    logger.warning(f"exported {source.name} in {time.perf_counter() - start:.0f} s")
    return open_model(folder, local=True)
