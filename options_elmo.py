"""ELMo's configuration fields as a plain dataclass (`ElmoOptions`), without transformers or torch.

One declaration of every field, its range and the rules between fields, with what is derived from them
(`input_width`, `n_filters`, `hidden_size`): transformers' `ElmoConfig` (configuration_elmo.py) is these fields in
its config class, and a model that runs without transformers (the inference core, `bilm_elmo.py`; an exported graph
in onnxruntime) reads config.json into `ElmoOptions` itself (`ElmoOptions.from_config_json`).
"""

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, get_args

from huggingface_hub.dataclasses import strict

TaskEncoder = Literal["linear", "lstm"]
# ElmoConfig.float_kernel: which kernels run the float GEMMs (kernels_elmo.float_kernel says how "auto" chooses).
FloatKernel = Literal["auto", "aten", "onednn"]
TASK_ENCODERS, FLOAT_KERNELS = get_args(TaskEncoder), get_args(FloatKernel)

# The dtypes a model's weights may have (`dtype`, `torch_dtype`), by torch's names: checked here by name, so that a
# config loads without torch (serving an exported model).
FLOAT_DTYPES = ("float32", "float", "bfloat16", "float16", "half", "float64", "double")

# The fields that decide the numbers. The rule: a field is here when changing it changes which ELMo vectors come out
# of the same words and weights, or their values beyond float rounding. Not here: the fields only training or the
# language model's softmax read; `float_kernel` and `lstm_gates_block_elements`, which choose how the same arithmetic
# runs (float rounding, as between two CPUs); `n_characters` (261 and 262 give the same model). A model's identity
# (`ModelFolder.identity`: the export cache's key, what a resumed `embed` run compares) and an exported graph's
# metadata (runtime/onnx_config.py) both record these, through `ElmoOptions.numbers_fields`.
NUMBERS_FIELDS = (
    "char_embedding_dim",
    "filters",
    "n_highway",
    "activation",
    "max_characters_per_token",
    "lstm_dim",
    "projection_dim",
    "n_layers",
    "cell_clip",
    "proj_clip",
    "use_skip_connections",
    "num_output_representations",
    "do_layer_norm",
    "scalar_mix_parameters",
    "char_vocab_size",
    "word_vocab_size",
    "word_embedding_dim",
    "sentence_boundary_ids",
)

# The char CNN of every published ELMo model.
DEFAULT_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

# What a config may ask for, far above every published ELMo (Original: 4096 cells, projection 512, 2 layers, 50
# characters; the largest vocabulary, lm1b's, has 793,471 words). A larger value is a typo or a hostile file: it is
# refused by name before anything is allocated, instead of exhausting memory or time while building the model.
MAX_DIM = 65536  # lstm_dim, projection_dim, embedding dims, filters per bank, task_encoder_dim, pair_encoder_dim
MAX_LAYERS = 64  # n_layers, n_highway, filter banks, num_output_representations
MAX_VOCAB_SIZE = 1 << 24  # lm_vocab_size, lm_n_negative_samples, char_vocab_size, word_vocab_size
MAX_PARAMETERS = 1 << 32  # the whole model (16 GiB in float32)
# The integer fields' ranges (an optional field's None is not checked).
INT_RANGES = {
    "lstm_dim": (1, MAX_DIM),
    "projection_dim": (1, MAX_DIM),
    "n_layers": (1, MAX_LAYERS),
    "num_output_representations": (1, MAX_LAYERS),
    # begin-of-word, a byte, end-of-word; the tokenizer bounds the rows it makes by its own, smaller limit
    # (basic_tokenization_elmo.MAX_CHARACTERS_PER_TOKEN), which this module does not import
    "max_characters_per_token": (3, MAX_DIM),
    "task_encoder_dim": (1, MAX_DIM),
    "pair_encoder_dim": (1, MAX_DIM),
    "n_highway": (0, MAX_LAYERS),
    "char_embedding_dim": (0, MAX_DIM),
    "word_embedding_dim": (0, MAX_DIM),
    "lstm_gates_block_elements": (1, 2**40),
    "lm_vocab_size": (4, MAX_VOCAB_SIZE),  # <S>, </S>, <UNK> and at least one word
    "lm_n_negative_samples": (1, MAX_VOCAB_SIZE),
    "char_vocab_size": (1, MAX_VOCAB_SIZE),
    "word_vocab_size": (1, MAX_VOCAB_SIZE),
}


@strict
@dataclass(kw_only=True)
class ElmoOptions:
    r"""
    The fields of an ELMo model's config.json: the biLM and its scalar mixes (the original options.json and AllenNLP's
    `Elmo`), and the heads' training settings. Defaults are the Original model (`2x4096_512_2048cnn_2xhighway`). Each
    field's type is checked by huggingface_hub's `@strict`, on construction and on assignment; its range and the rules
    between fields by `validate_elmo`, which `@strict` runs after construction. `ElmoConfig` is these fields in
    transformers' config class.

    Args:
        char_embedding_dim (`int`, defaults to 16): size of the character embeddings (`char_cnn.embedding.dim`).
        filters (`list[list[int]]`): `[width, number]` of each char-CNN filter bank (`char_cnn.filters`).
        n_highway (`int`, defaults to 2): highway layers after the char CNN.
        activation (`str`, defaults to `"relu"`): char-CNN activation, `"relu"` or `"tanh"` (highway always uses relu).
        n_characters (`int`, defaults to 262): 261 (bilm-tf training files) or 262 (published files). Kept for
            round-tripping only: both give the same model, as in AllenNLP.
        max_characters_per_token (`int`, defaults to 50): characters per token including begin/end-of-word markers.
        lstm_dim (`int`, defaults to 4096): LSTM memory cell size.
        projection_dim (`int`, defaults to 512): size of the token embedding and of each LSTM's projected output.
        n_layers (`int`, defaults to 2): LSTM layers per direction.
        cell_clip (`float`, *optional*, defaults to 3.0): memory cells are clipped to +-cell_clip (None: no clipping).
        proj_clip (`float`, *optional*, defaults to 3.0): projected outputs are clipped to +-proj_clip (None: none).
        use_skip_connections (`bool`, defaults to `True`): add each LSTM layer's input to its output (layers >= 1).
        num_output_representations (`int`, defaults to 1): number of independent scalar mixes (ELMo vectors).
        do_layer_norm (`bool`, defaults to `False`): layer-normalise each biLM layer before mixing (AllenNLP rule:
            mean and variance over all unmasked positions of the batch).
        scalar_mix_parameters (`list[float]`, *optional*): fixed, non-trainable mix weights (before softmax), one
            per biLM layer, as AllenNLP's `scalar_mix_parameters`. None: trainable weights initialised to 0.
        dropout (`float`, defaults to 0.5): dropout on each ELMo vector (training only), AllenNLP's default.
        freeze_bilm (`bool`, defaults to `True`): task heads keep the biLM (char CNN, highway, LSTMs) frozen and
            train only the scalar mix, gamma and the task layers, the ELMo recipe. False: full fine-tuning.
        task_encoder (`str`, defaults to `"linear"`): what task heads put between the ELMo vectors and the
            classifier: `"linear"` (nothing) or `"lstm"` (a one-layer BiLSTM of `task_encoder_dim` per direction).
        task_encoder_dim (`int`, defaults to 128): hidden size per direction of the `"lstm"` task encoder (and of
            `ElmoForQuestionAnswering`'s modeling BiLSTM).
        pair_encoder_dim (`int`, *optional*): `ElmoForSequenceClassification` relates text pairs with an ESIM-style
            encoder (soft alignment, then a projection and BiLSTM of this size per direction, pooled); None: single
            sentences only.
        pair_alignment (`bool`, defaults to `True`): the pair encoder aligns the two sentences (ESIM's attention);
            False: each sentence is composed and pooled alone (the baseline that measures the alignment).
        mix_l2_lambda (`float`, defaults to 0.0): task heads add `mix_l2_lambda * sum(w ** 2)` over the scalar-mix
            weights (before softmax) to the loss, pulling the mix toward uniform (the paper used 0.001).
        lm_vocab_size (`int`, *optional*): size of the word vocabulary of the language-model softmax
            (`ElmoForLanguageModeling`; bilm-tf's `n_tokens_vocab`). None: no LM head.
        lm_n_negative_samples (`int`, *optional*): sampled softmax with this many negatives per batch in training
            (bilm-tf's `n_negative_samples_batch`, 8192); None: full softmax. Evaluation always uses the full one.
        lm_dropout (`float`, defaults to 0.0): dropout on the top biLM layer before the LM softmax (bilm-tf: 0.1).
        char_vocab_size (`int`, *optional*): None: characters are UTF-8 bytes and markers (AllenNLP, bilm-tf). An int:
            characters are ids of a character vocabulary of this size (ELMoForManyLangs' char.dic), shifted by +1 in
            `input_ids` (0 = no word); the char embedding then has `char_vocab_size + 1` rows.
        word_vocab_size (`int`, *optional*) and word_embedding_dim (`int`, defaults to 0): an optional word
            embedding (ELMoForManyLangs' word.dic) whose vector is concatenated before the char-CNN output, ahead of
            the projection. Each `input_ids` row then starts with the word id + 1, followed by the char ids.
            `char_embedding_dim=0` with a word embedding: a word-only model (no char CNN).
        sentence_boundary_ids (`list[list[int]]`, *optional*): the `input_ids` rows of the BOS and EOS words the
            model adds around each sentence, for vocabulary inputs (set by the ELMoForManyLangs converter). None:
            AllenNLP's byte rules (required when a character vocabulary or a word embedding is used).
        lstm_gates_block_elements (`int`, defaults to 2**24): a performance setting, not part of the model: the LSTM
            computes its input-to-gates products for a block of time steps at once, sized to hold about this many
            gate values (both directions), so that memory stays bounded for long inputs and large batches while each
            GEMM stays large. Results do not depend on it beyond float rounding. Also a `from_pretrained` argument.
        float_kernel (`str`, defaults to `"auto"`): a performance setting, not part of the model: which of torch's
            kernels run the float GEMMs of the char CNN and the LSTM in inference: `"aten"` (torch's matmuls: MKL on
            x86), `"onednn"` (oneDNN's linear on weights prepacked in this process), or `"auto"`, the fastest by a
            rule measured per CPU (`kernels_elmo.best_float_kernel`, docs/speed.md), resolved once per process.
            Training always runs torch's differentiable matmuls. Results do not depend on it beyond float rounding.
            Also a `from_pretrained` argument.
    """

    # Sequences: callers may give tuples where JSON gives lists; `store_lists` stores lists.
    char_embedding_dim: int = 16
    filters: Sequence[Sequence[int]] = field(default_factory=lambda: copy.deepcopy(DEFAULT_FILTERS))
    n_highway: int = 2
    activation: Literal["relu", "tanh"] = "relu"
    n_characters: Literal[261, 262] = 262
    max_characters_per_token: int = 50
    lstm_dim: int = 4096
    projection_dim: int = 512
    n_layers: int = 2
    cell_clip: float | int | None = 3.0
    proj_clip: float | int | None = 3.0
    use_skip_connections: bool = True
    num_output_representations: int = 1
    do_layer_norm: bool = False
    scalar_mix_parameters: Sequence[float | int] | None = None
    dropout: float | int = 0.5
    freeze_bilm: bool = True
    task_encoder: TaskEncoder = "linear"
    task_encoder_dim: int = 128
    pair_encoder_dim: int | None = None
    pair_alignment: bool = True
    mix_l2_lambda: float | int = 0.0
    lm_vocab_size: int | None = None
    lm_n_negative_samples: int | None = None
    lm_dropout: float | int = 0.0
    char_vocab_size: int | None = None
    word_vocab_size: int | None = None
    word_embedding_dim: int = 0
    sentence_boundary_ids: Sequence[Sequence[int]] | None = None
    lstm_gates_block_elements: int = 2**24
    float_kernel: FloatKernel = "auto"

    @classmethod
    def from_config_json(cls, values):
        """The fields of `values` (a config.json, as a dict; its other keys are transformers' own), checked as at
        construction: huggingface_hub's StrictDataclassError names a field that is refused (ValueError: a weights'
        dtype that is none, `check_dtype_names`)."""
        check_dtype_names(values)
        names = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in values.items() if name in names})

    def __post_init__(self):
        self.store_lists()

    def numbers_fields(self):
        """The fields that decide the numbers (NUMBERS_FIELDS), {name: value}, as config.json holds them."""
        return {name: copy.deepcopy(getattr(self, name)) for name in NUMBERS_FIELDS}

    def store_lists(self):
        """Sequences as config.json holds them: callers may give tuples, JSON gives lists."""
        for name in ("filters", "scalar_mix_parameters", "sentence_boundary_ids"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, [list(v) if isinstance(v, Sequence) else v for v in value])

    @property
    def n_filters(self):
        """Width of the char-CNN output (sum of the filter counts)."""
        return sum(n for _, n in self.filters)

    @property
    def input_width(self):
        """Ids per word in `input_ids`: the word id (with a word embedding), then the char ids (with a char CNN)."""
        return (1 if self.word_embedding_dim else 0) + (self.max_characters_per_token if self.char_embedding_dim else 0)

    @property
    def hidden_size(self):
        """Size of an ELMo vector: forward and backward halves of `projection_dim` each."""
        return 2 * self.projection_dim

    def validate_elmo(self):
        """The ranges and the rules between fields (`@strict` checked the types): fail early, naming the field,
        instead of deep inside the model."""
        for name in (*INT_RANGES, *NUMBER_RULES):
            check_range(name, getattr(self, name))
        self._validate_token_inputs()
        if not 1 <= len(self.filters) <= MAX_LAYERS:
            raise ValueError(
                f"ElmoConfig.filters must list 1 to {MAX_LAYERS} [width, number] filter banks, "
                f"got {self.filters!r:.200}"
            )
        for f in self.filters:
            if len(f) != 2 or not all(0 < v <= MAX_DIM for v in f):
                raise ValueError(
                    f"ElmoConfig.filters entries must be [width, number], integers from 1 to {MAX_DIM:,}, "
                    f"got {f!r:.200}"
                )
            if f[0] > self.max_characters_per_token:
                raise ValueError(
                    f"ElmoConfig.filters: width {f[0]} is wider than max_characters_per_token "
                    f"({self.max_characters_per_token})"
                )
        if self.scalar_mix_parameters is not None:
            if not all(math.isfinite(w) for w in self.scalar_mix_parameters):
                raise ValueError(
                    f"ElmoConfig.scalar_mix_parameters must be finite numbers, got {self.scalar_mix_parameters!r}"
                )
            if len(self.scalar_mix_parameters) != self.n_layers + 1:
                raise ValueError(
                    f"ElmoConfig.scalar_mix_parameters needs one value per biLM layer (n_layers + 1 = "
                    f"{self.n_layers + 1}), got {len(self.scalar_mix_parameters)}"
                )
        if self.num_parameters_estimate() > MAX_PARAMETERS:
            raise ValueError(
                f"ElmoConfig asks for about {self.num_parameters_estimate():,} parameters, "
                f"more than {MAX_PARAMETERS:,}: "
                "check lstm_dim, projection_dim, n_layers and the vocabulary sizes"
            )

    def num_parameters_estimate(self):
        """The biLM's, the LM softmax's and the char / word embeddings' parameters, counted from the sizes alone
        (the scalar mixes and task layers are small), so that a config can be judged before anything is built."""
        H, P, L, F = self.lstm_dim, self.projection_dim, self.n_layers, self.n_filters
        lstm = L * 2 * (2 * P * 4 * H + 4 * H + H * P)
        d = self.char_embedding_dim
        chars = (self.char_vocab_size or 261) * d + sum(width * d * n + n for width, n in self.filters)
        tokens = chars + self.n_highway * (2 * F * F + 2 * F) + (F + self.word_embedding_dim) * P
        words = (self.word_vocab_size or 0) * self.word_embedding_dim
        return lstm + tokens + words + (self.lm_vocab_size or 0) * (P + 1)

    def _validate_token_inputs(self):
        """The optional word embedding, the character vocabulary and the boundary rows they need."""
        if (self.word_vocab_size is None) != (self.word_embedding_dim == 0):
            raise ValueError(
                "ElmoConfig.word_vocab_size and word_embedding_dim go together (a word embedding needs both), got "
                f"{self.word_vocab_size!r} and {self.word_embedding_dim!r}"
            )
        if self.char_embedding_dim == 0 and not self.word_embedding_dim:
            raise ValueError("ElmoConfig.char_embedding_dim is 0 (no char CNN), so a word embedding is needed")
        vocabulary_inputs = self.char_vocab_size is not None or self.word_embedding_dim > 0
        rows = self.sentence_boundary_ids
        if not vocabulary_inputs:
            if rows is not None:
                raise ValueError(
                    "ElmoConfig.sentence_boundary_ids is only for a character vocabulary or word embedding"
                )
            return
        if not (rows is not None and len(rows) == 2 and all(len(r) == self.input_width and min(r) > 0 for r in rows)):
            raise ValueError(
                f"ElmoConfig.sentence_boundary_ids must be the BOS and EOS input rows, two lists of {self.input_width} "
                f"positive ids, got {rows!r}"
            )
        # The largest id of each position, as the embeddings have rows: the word id, then the char ids (each + 1;
        # UTF-8 byte chars, char_vocab_size None, are the model's to check).
        highest = [self.word_vocab_size] if self.word_embedding_dim else []
        if self.char_embedding_dim and self.char_vocab_size is not None:
            highest += [self.char_vocab_size] * self.max_characters_per_token
        for row in rows:
            beyond = [(i, high) for i, high in zip(row, highest) if i > high]
            if beyond:
                raise ValueError(
                    f"ElmoConfig.sentence_boundary_ids holds the id {beyond[0][0]}, beyond its vocabulary (ids 1 to "
                    f"{beyond[0][1]}, word_vocab_size and char_vocab_size): the rows must be those the model's "
                    "vocabularies give to the BOS and EOS words (set by the ELMoForManyLangs converter)"
                )


def check_dtype_names(values):
    """Refuse a config's weights dtype (`dtype`, or transformers 4's `torch_dtype`, in `values`) that is not a torch
    dtype of floats, by name, so that a config is checked without torch (transformers would fail with
    AttributeError: module 'torch' has no attribute 'banana')."""
    for key in ("dtype", "torch_dtype"):
        value = values.get(key)
        if isinstance(value, str) and value not in ("auto", *FLOAT_DTYPES):
            raise ValueError(
                f"ElmoConfig.{key} {value!r:.100} is not a torch dtype of floats (e.g. 'float32', 'bfloat16')"
            )


# The number fields' rules that need no other field: (whether a value keeps it, what it says).
NUMBER_RULES = {
    "cell_clip": (lambda v: math.isfinite(v) and v > 0, "a positive finite number or None (no clipping)"),
    "proj_clip": (lambda v: math.isfinite(v) and v > 0, "a positive finite number or None (no clipping)"),
    "dropout": (lambda v: 0 <= v < 1, "in [0, 1)"),  # (NaN fails it too)
    "lm_dropout": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "mix_l2_lambda": (lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number"),
}


def check_range(name, value):
    """Refuse a field's value outside its range, one field at a time, on construction and on assignment: an integer
    field's (`INT_RANGES`), a number field's (`NUMBER_RULES`); None (an optional field) and other names pass (types
    are `@strict`'s)."""
    bounds = INT_RANGES.get(name)
    if bounds is not None and isinstance(value, int) and not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"ElmoConfig.{name} must be an integer from {bounds[0]} to {bounds[1]:,}, got {value!r}")
    keeps, rule = NUMBER_RULES.get(name, (None, None))
    if keeps is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and not keeps(value):
        raise ValueError(f"ElmoConfig.{name} must be {rule}, got {value!r}")
