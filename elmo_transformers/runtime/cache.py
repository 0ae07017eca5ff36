"""Exports made on first use (`runtime="onnxruntime"`, `embed --runtime onnxruntime`), as optimum's
`ORTModel.from_pretrained(..., export=True)` does: kept in the Hugging Face cache (HF_HOME/elmo-transformers/onnx/),
keyed by a SHA-256 of the model's config.json and weight files and by the dtype, so that a changed model never
reuses a stale graph; a file lock (filelock) makes two processes starting at once export once."""

import glob
import hashlib
import os


def files_sha256(paths):
    """SHA-256 over the name, size and bytes of each file at `paths`, in order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{os.path.basename(path)} {os.path.getsize(path)}\n".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def export_folder(source, dtype):
    """Where the cache keeps `source`'s (a model_source.ModelFolder) export in `dtype`."""
    from huggingface_hub import constants

    weights = sorted(glob.glob(os.path.join(glob.escape(source.path), "*.safetensors")))
    model_sha256 = files_sha256([os.path.join(source.path, "config.json"), *weights])
    return os.path.join(constants.HF_HOME, "elmo-transformers", "onnx", f"{model_sha256}-{dtype}")


def cached_export(source, dtype):
    """The folder of `source`'s (a model_source.ModelFolder) export in `dtype` (float32 or int8), exported on first
    use."""
    from filelock import FileLock

    folder = export_folder(source, dtype)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with FileLock(folder + ".lock"):
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            from ..export.onnx import export_onnx  # torch: only when there is something to export

            export_onnx(source, folder, dtype)
    return folder
