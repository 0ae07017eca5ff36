"""The exported graph's contract, written once (as optimum's per-architecture `OnnxConfig`): its inputs and outputs
with their dtypes and axes, which axes are dynamic, and the metadata it records (the opset is the exporter's, read
from the graph). The exporter (`runtime.onnx_export`) traces and labels the graph from it, the card's Inputs/Outputs
are written from it, and the runner (`runtime.onnx`) checks a folder's graph against it and the folder's config.json
before it runs. Imports nothing heavy: the runner reads it where torch is not installed."""

import json

DTYPES = ("float32", "int8")
DTYPE_KEY = "dtype"  # metadata: float32 or int8, as exported
# metadata: the fields of config.json that decide the graph's numbers (`options_elmo.NUMBERS_FIELDS`), as exported;
# the others (training, performance settings) may change after the export
CONFIG_KEY = "elmo_config"


class ElmoOnnxConfig:
    """The graph of the ELMo model of `config` (its `options_elmo.ElmoOptions`, or transformers' ElmoConfig, which
    holds the same fields): names, dtypes and shapes of its inputs and outputs (an int is fixed by the config, a str
    a dynamic axis)."""

    def __init__(self, config):
        self.config = config

    @property
    def inputs(self):
        return {
            "input_ids": (
                "int64",
                ("batch", "words", self.config.input_width),
                "the char ids of this folder's tokenizer (`tokenization_elmo.py`)",
            ),
            "attention_mask": ("int64", ("batch", "words"), "1 for words and 0 for padding (padding on the right)"),
        }

    @property
    def outputs(self):
        width, layers = self.config.hidden_size, self.config.n_layers + 1
        return {
            "last_hidden_state": ("float32", ("batch", "words", width), "the ELMo vectors (the scalar mix)"),
            "hidden_states": (
                "float32",
                (layers, "batch", "words", width),
                "the biLM layers: layer 0 is the token embedding twice, layer l is `[forward_l ; backward_l]`",
            ),
        }

    def dynamic_axes(self, names):
        """{input name: {axis: dynamic axis name}} for `names`' inputs or outputs."""
        specs = {**self.inputs, **self.outputs}
        return {
            name: {axis: size for axis, size in enumerate(specs[name][1]) if isinstance(size, str)} for name in names
        }

    def graph_fields(self):
        """The recorded metadata CONFIG_KEY: the config's fields that decide the numbers (`numbers_fields()`), as
        JSON."""
        return json.dumps(self.config.numbers_fields(), sort_keys=True)

    def describe(self):
        """The card's Inputs and Outputs sections (Markdown), from the same specs the export uses."""

        def lines(specs):
            return "\n".join(
                f"- `{name}`: {dtype} `[{', '.join(map(str, shape))}]`, {text}."
                for name, (dtype, shape, text) in specs.items()
            )

        return f"## Inputs\n\n{lines(self.inputs)}\n\n## Outputs\n\n{lines(self.outputs)}\n"
