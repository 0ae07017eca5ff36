"""`OnnxElmoModel`: a folder `elmo-transformers export onnx` wrote, run by onnxruntime on the CPU, called as
`ElmoModel` is (what `ElmoEmbedder` and `embed` call), with NumPy arrays: it imports no torch, so a process that
embeds with an exported folder never loads PyTorch. Before it runs, the folder's parts are checked against each other
(the graph's input and output shapes and its recorded config against config.json, `check_graph`), as the PyTorch
path checks weights against the config."""

import importlib.util
import json
import os
import sys
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError, UserError, first_line
from ..model_files import GRAPH_FILES
from ..model_folder import loading, open_model
from . import ModelTraits, threads
from .onnx_config import CONFIG_KEY, DTYPE_KEY, DTYPES, ElmoOnnxConfig

INSTALL = 'pip install "elmo-transformers[onnx]"'
# Word positions (sentences x longest sentence) per onnxruntime run: a longer batch is run in slices of whole
# sentences, so that onnxruntime's working memory (the LSTM's gates of every position) stays bounded whatever the
# batch; a single sentence longer than this runs alone.
MAX_RUN_WORDS = 2048


def check_onnx_installed(packages, purpose, value=None):
    """A UserError naming the install command when one of `packages` is missing (`purpose` needs them; `value` is
    what the error is about)."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"{purpose} needs {', '.join(missing)}, not installed here: {INSTALL}", value)


def intra_op_threads():
    """As many threads as torch uses: torch.get_num_threads() where torch is already imported (not importing it),
    else OMP_NUM_THREADS where it is a count (`runtime.threads.requested_threads`: at most the CPUs this process may
    use), else the CPUs free to this process now (`free_cpus`: on a busy machine fewer than onnxruntime's default,
    the physical cores)."""
    if sys.modules.get("torch") is not None:
        return sys.modules["torch"].get_num_threads()
    return threads.requested_threads() or threads.free_cpus()


@dataclass
class OnnxElmoOutput:
    """ElmoModelOutput's fields, as NumPy arrays."""

    last_hidden_state: np.ndarray
    hidden_states: tuple | None
    mask: np.ndarray


def check_graph(folder, session, config):
    """Refuse, in one line, a folder whose model.onnx does not fit its config.json (`config`, its ElmoOptions): an
    input or output of another name or fixed size (a graph swapped for another model's export), or recorded config
    fields that differ (a config.json edited after the export)."""
    contract = ElmoOnnxConfig(config)
    again = "restore the files written together by `export onnx`, or export the model again"
    for kind, found, expected in [
        ("input", session.get_inputs(), contract.inputs),
        ("output", session.get_outputs(), contract.outputs),
    ]:
        shapes = {node.name: node.shape for node in found}
        for name, (_, shape, _) in expected.items():
            if name not in shapes:
                raise ModelError(
                    f"{folder}: its model.onnx has no {kind} {name} (it has {', '.join(shapes)}): "
                    f"not an ELMo export; {again}",
                    folder,
                )
            fixed = [(axis, size) for axis, size in enumerate(shape) if isinstance(size, int)]
            for axis, size in fixed:
                graph_size = shapes[name][axis] if len(shapes[name]) == len(shape) else None
                if graph_size != size:
                    raise ModelError(
                        f"{folder}: its model.onnx does not fit its config.json: {kind} {name} has shape "
                        f"{shapes[name]}, the config gives {list(shape)}; {again}",
                        folder,
                    )
    recorded = session.get_modelmeta().custom_metadata_map.get(CONFIG_KEY)
    if recorded is None:
        raise ModelError(
            f"{folder}: its model.onnx does not record the config it was exported with (metadata "
            f"{CONFIG_KEY}), as `export onnx` writes it; {again}",
            folder,
        )
    recorded = json.loads(recorded)
    for name, value in config.numbers_fields().items():
        if recorded.get(name) != value:
            raise ModelError(
                f"{folder}: its config.json does not fit its model.onnx: {name} is {value!r} in "
                f"config.json, the graph was exported with {recorded.get(name)!r}; {again}",
                folder,
            )


class OnnxElmoModel:
    """An exported folder run by onnxruntime on the CPU, called as `ElmoModel` is: char ids and attention mask in
    (NumPy arrays, or anything `np.asarray` reads), an `OnnxElmoOutput` of NumPy arrays out (`last_hidden_state`,
    `hidden_states`, `mask`). The graph is stateless (`traits.stateful` is False), so `lstm_state` /
    `return_lstm_state` are refused. onnxruntime runs on as many threads as torch (`intra_op_threads`). A batch of
    more than MAX_RUN_WORDS word positions runs in slices of whole sentences."""

    def __init__(self, folder, dtype=None, device=None, threads=None):
        """`folder`: an exported folder, or `model_folder.open_model`'s ModelFolder of one (whose config.json was
        read there). `dtype` ("float32" or "int8"; None: the folder's own) and `device` (None or the CPU) are
        checked against the folder: a dtype other than the one it was exported in is refused, naming it. `threads`:
        onnxruntime's intra-op threads (default: `intra_op_threads`)."""
        self.folder = open_model(folder, local=True)
        path = self.folder.path
        check_onnx_installed(("onnxruntime",), f"{path} is an exported ONNX model: running it", path)
        # onnxruntime records each process (its Python's path, the OS, the CPU) in a telemetry database under
        # ~/.cache/Microsoft/ unless this variable is set when it is first imported (disable_telemetry_events() does
        # not stop it): set here unless the user chose otherwise (docs/serving.md).
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        import onnxruntime

        # onnxruntime raises these only from its compiled module: it exports no other name for them.
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            Fail,
            InvalidArgument,
            InvalidGraph,
            InvalidProtobuf,
            NoSuchFile,
        )

        if device is not None and str(device).split(":")[0] != "cpu":
            raise UserError(
                f"{device}: {path} is an exported ONNX model, which runs on the CPU here "
                "(onnxruntime's CPU provider): leave the device out, or use the PyTorch model",
                str(device),
            )
        with loading(path):
            self.config = self.folder.options()
        self.device = "cpu"
        options = onnxruntime.SessionOptions()
        self.threads = threads or intra_op_threads()
        options.intra_op_num_threads, options.inter_op_num_threads = self.threads, 1
        options.log_severity_level = 3  # errors only: its graph optimiser's notes ("Removing initializer") are not ours
        graph = self.folder.file(GRAPH_FILES[0])
        try:
            self.session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, NoSuchFile) as e:  # missing, empty, cut...
            raise ModelError(
                f"{path}: onnxruntime cannot load its model.onnx ({first_line(e)}): restore it, "
                "or export the model again",
                path,
            ) from None
        self.dtype = self.session.get_modelmeta().custom_metadata_map.get(DTYPE_KEY)
        if self.dtype not in DTYPES:
            raise ModelError(
                f"{path}: its model.onnx does not name its dtype (float32 or int8) in its "
                "metadata, as `export onnx` writes it: export the model again",
                path,
            )
        check_graph(path, self.session, self.config)
        self.traits = ModelTraits("onnxruntime", self.dtype, stateful=False, tensors="np")
        if dtype not in (None, self.dtype):
            other = f"export the model again in {dtype}" if dtype in DTYPES else "use the PyTorch model"
            raise UserError(
                f"{dtype}: {path} is an ONNX model exported in {self.dtype}, the one dtype it runs "
                f"in: leave the dtype out, or {other}",
                dtype,
            )

    def __call__(
        self,
        input_ids,
        attention_mask=None,
        output_hidden_states=None,
        lstm_state=None,
        return_lstm_state=False,
        return_dict=True,
    ):
        """`ElmoModel.forward`'s arguments (`return_dict` as there; the output is always an `OnnxElmoOutput`). An
        empty batch (no sentences, or no words) gives empty arrays without running the graph."""
        if lstm_state is not None or return_lstm_state:
            path = self.folder.path
            raise UserError(
                f"{path} is an exported ONNX model, whose graph is stateless (every call starts from a "
                "zero LSTM state): it cannot carry the LSTM state from one window of a text to the next; "
                "use the PyTorch model for stateful windows",
                path,
            )
        input_ids = np.asarray(input_ids, dtype=np.int64)
        if input_ids.ndim != 3 or input_ids.shape[2] != self.config.input_width:
            raise ValueError(f"input_ids must be [batch, words, {self.config.input_width}], got {input_ids.shape}")
        batch, words = input_ids.shape[:2]
        attention_mask = (
            np.ones((batch, words), np.int64) if attention_mask is None else np.asarray(attention_mask, dtype=np.int64)
        )
        layers = np.zeros((self.config.n_layers + 1, batch, words, self.config.hidden_size), np.float32)
        vectors = np.zeros((batch, words, self.config.hidden_size), np.float32)
        rows = max(1, MAX_RUN_WORDS // max(words, 1))
        for start in range(0, batch if words else 0, rows):
            piece = slice(start, start + rows)
            vectors[piece], layers[:, piece] = self.session.run(
                ["last_hidden_state", "hidden_states"],
                {"input_ids": input_ids[piece], "attention_mask": attention_mask[piece]},
            )
        return OnnxElmoOutput(
            last_hidden_state=vectors,
            hidden_states=tuple(layers) if output_hidden_states else None,
            mask=(input_ids > 0).any(axis=-1) & attention_mask.astype(bool),  # bilm_elmo.word_mask, in NumPy
        )
