"""An ELMo model as an ONNX graph that onnxruntime serves without PyTorch (`elmo-transformers export onnx`).

What the folder holds and how the graph is made: `runtime.onnx_export`. Here the model is opened and loaded in
float32 (`model_source.load_model`), and the folder is written as a conversion is (`conversion/output.py`): whole or
not at all, and --overwrite replaces only an earlier conversion or export. `runtime.onnx.OnnxElmoModel` runs it.
"""

import dataclasses

from ..conversion.output import check_output, write_folder_atomically
from ..errors import UserError
from ..model_folder import open_model
from ..model_source import load_model
from ..runtime.onnx import OnnxElmoModel, check_onnx_installed  # noqa: F401  (OnnxElmoModel: its old import path)
from ..runtime.onnx_config import DTYPES
from ..runtime.onnx_export import PACKAGES, write_export


def export_onnx(folder, output, dtype="float32", overwrite=False, source=None):
    """Export the ELMo model `folder` (a folder or Hub repo id, or `model_folder.open_model`'s ModelFolder) into the
    folder `output`; returns its absolute path. `source` is how the card and errors name the model (default: as
    `folder` names it)."""
    if dtype not in DTYPES:
        raise UserError(f"{{dtype}} {dtype!r:.50}: the ONNX export offers {', '.join(DTYPES)}", arguments=["dtype"])
    check_onnx_installed(PACKAGES, "exporting to ONNX")
    named = open_model(folder)
    if source is not None:
        named = dataclasses.replace(named, name=str(source))  # errors name the model as given
    output = check_output(output, overwrite, [named.path])
    from modeling_elmo import ElmoModel

    model, tokenizer = load_model(named, ElmoModel, dtype="float32")
    return write_folder_atomically(lambda staging: write_export(model, tokenizer, staging, dtype, named.name), output,
                                   overwrite)
