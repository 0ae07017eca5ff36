"""The ELMo biLM in plain torch (Peters et al., 2018, "Deep contextualized word representations"), in the paper's order.

A char CNN with highway layers and a projection gives context-free token embeddings; forward and backward LSTM stacks
with cell projection, cell/projection clipping and skip connections contextualise them; scalar mixes combine the
layers into ELMo vectors; a softmax over the word vocabulary scores them as a language model. Numerics follow
AllenNLP's `Elmo`/`_ElmoBiLm`, except that every call starts from a zero LSTM state (AllenNLP carries the previous
batch's final state).

What the model computes is written once, in `ElmoModelMixin` (the ELMo vectors) and `ElmoLanguageModelMixin` (the
language model's scores), on modules named as the saved weights are: transformers' classes (`modeling_elmo.py`:
`ElmoModel`, `ElmoForLanguageModeling` and the heads, for `from_pretrained`, Trainer and the Hub) and the cores here
(`ElmoModelCore`, `ElmoLanguageModelCore`), which run the same weights without importing transformers: what
inference loads (`elmo_transformers.model_source.load_model`), so that it starts as fast as torch itself.
"""

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

try:  # loaded as remote code, the modules are one package
    from .basic_tokenization_elmo import (
        BOS_WORD,
        CHAR_VOCAB_SIZE,
        EOS_WORD,
        sentence_boundary_char_ids,
        word_to_char_ids,
    )
    from .kernels_elmo import (
        Bf16Linear,
        Int8Gemms,
        export_gemms,
        float_gemms,
        float_kernel,
        float_linear,
        gates_block_steps,
        inplace_lstm_cell,
        int8_gemms,
        int8_kernel,
        lstm_step,
        onednn_runs,
        scan_lstm,
        wants_grad,
    )
except ImportError:  # installed with pip, they are top-level modules
    from basic_tokenization_elmo import (
        BOS_WORD,
        CHAR_VOCAB_SIZE,
        EOS_WORD,
        sentence_boundary_char_ids,
        word_to_char_ids,
    )
    from kernels_elmo import (
        Bf16Linear,
        Int8Gemms,
        export_gemms,
        float_gemms,
        float_kernel,
        float_linear,
        gates_block_steps,
        inplace_lstm_cell,
        int8_gemms,
        int8_kernel,
        lstm_step,
        onednn_runs,
        scan_lstm,
        wants_grad,
    )


@dataclass
class ElmoOutput:
    """What `ElmoModelCore` and `ElmoModel` return.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch, words, 2 * projection_dim)`):
            The first ELMo representation (`elmo_representations[0]`).
        elmo_representations (`tuple(torch.FloatTensor)`):
            `config.num_output_representations` scalar mixes of the biLM layers, each `(batch, words, 2 * P)`.
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            The `n_layers + 1` biLM layers, each `(batch, words, 2 * P)`: layer 0 is the token embedding repeated
            twice, layer l is `[forward_l ; backward_l]`. Zeros at padded positions; BOS/EOS removed.
        mask (`torch.BoolTensor` of shape `(batch, words)`): True at real words.
        lstm_state (returned with `return_lstm_state=True`):
            Per biLM layer, the final `(h [2, batch, P], c [2, batch, H])` of each sentence (dim 0: forward, backward),
            to pass as `lstm_state` with the next window of the same texts.
    """

    last_hidden_state: torch.FloatTensor | None = None
    elmo_representations: tuple[torch.FloatTensor, ...] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    mask: torch.BoolTensor | None = None
    lstm_state: tuple[tuple[torch.FloatTensor, torch.FloatTensor], ...] | None = None


def masked_mean(vectors, mask):
    """Mean of each sentence's word vectors [B, T, D] -> [B, D] over `mask` [B, T] (TF-Hub ELMo's `default`
    output); an empty sentence gives zeros."""
    weights = mask.unsqueeze(-1).to(vectors.dtype)
    return (vectors * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def word_mask(input_ids, attention_mask=None):
    """Where the words are, [B, T]: a position whose char ids are not all padding and, if `attention_mask` is given,
    where it is 1 (the mask of every output; an exported graph's caller computes it here too)."""
    mask = (input_ids > 0).any(dim=-1)
    return mask if attention_mask is None else mask & attention_mask.bool()


def sentence_boundary_ids(config):
    """The `input_ids` rows of the BOS and EOS words added around each sentence: the config's (vocabulary inputs,
    ELMoForManyLangs) or else AllenNLP's byte rules."""
    return config.sentence_boundary_ids or sentence_boundary_char_ids(config.max_characters_per_token)


class ElmoHighway(nn.Module):
    """One highway layer: `carry * relu(transform(x)) + (1 - carry) * x` with `carry = sigmoid(carry(x))`.

    `weight` stacks the transform rows over the carry rows (one GEMM for both), in `torch.nn.Linear` orientation.
    """

    def __init__(self, size, linear=F.linear):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(2 * size, size))
        self.bias = nn.Parameter(torch.empty(2 * size))
        self.linear = linear  # `F.linear` or its form on another float kernel (kernels_elmo.float_linear)

    def forward(self, x):
        transform, carry = self.linear(x, self.weight, self.bias).chunk(2, dim=-1)
        carry = torch.sigmoid(carry)
        return carry * F.relu(transform) + (1 - carry) * x


class ElmoLinear(nn.Linear):
    """`nn.Linear` run by the chosen float kernel (`linear`: `F.linear` or kernels_elmo.float_linear's)."""

    def __init__(self, in_features, out_features, linear=F.linear):
        super().__init__(in_features, out_features)
        self.linear = linear

    def forward(self, x):
        return self.linear(x, self.weight, self.bias)


class ElmoCharacterEncoder(nn.Module):
    """Char CNN + highway + projection: [words, max_characters_per_token] char ids -> [words, P] embeddings.

    ELMoForManyLangs models may add a word embedding (the word id leads each input row; its vector comes before the
    char-CNN output in the projection's input) or have only that (`char_embedding_dim` 0: no char CNN).
    """

    def __init__(self, config):
        super().__init__()
        char_cnn = config.char_embedding_dim > 0
        n_chars = CHAR_VOCAB_SIZE if config.char_vocab_size is None else config.char_vocab_size + 1
        self.char_embedding = nn.Embedding(n_chars, config.char_embedding_dim, padding_idx=0) if char_cnn else None
        filters = config.filters if char_cnn else []
        self.convolutions = nn.ModuleList(nn.Conv1d(config.char_embedding_dim, n, width) for width, n in filters)
        self.activation = torch.tanh if config.activation == "tanh" else F.relu
        self.linear = float_linear(float_kernel(config.float_kernel))  # every GEMM below: conv, highway, projection
        self.highways = nn.ModuleList(
            ElmoHighway(config.n_filters, self.linear) for _ in range(config.n_highway if char_cnn else 0)
        )
        self.word_embedding = None
        if config.word_embedding_dim:
            self.word_embedding = nn.Embedding(config.word_vocab_size + 1, config.word_embedding_dim, padding_idx=0)
        char_features = config.n_filters if char_cnn else 0
        self.projection = ElmoLinear(config.word_embedding_dim + char_features, config.projection_dim, self.linear)

    def use_linear(self, linear):
        """Run every GEMM of the char CNN (convolutions, highway, projection) through `linear` (`F.linear`'s
        signature): how int8 on AMX runs them in bf16 (`kernels_elmo.Bf16Linear`)."""
        self.linear = self.projection.linear = linear
        for highway in self.highways:
            highway.linear = linear

    def check_ids(self, input_ids):
        """Refuse ids outside the embedding tables (0 = no word), naming the range."""
        tables = []
        if self.word_embedding is not None:
            tables.append(("word", self.word_embedding, input_ids[..., 0]))
            input_ids = input_ids[..., 1:]
        if self.char_embedding is not None:
            tables.append(("char", self.char_embedding, input_ids))
        for kind, table, ids in tables:
            if ids.numel() and (ids.min() < 0 or ids.max() >= table.num_embeddings):
                raise ValueError(f"input_ids must be {kind} ids in [0, {table.num_embeddings - 1}]")

    def forward(self, char_ids):
        words = []
        if self.word_embedding is not None:
            words.append(self.word_embedding(char_ids[..., 0]))
            char_ids = char_ids[..., 1:]
        if self.char_embedding is None:
            return self.projection(words[0])
        chars = self.char_embedding(char_ids)  # [words, chars, char dim]
        # Each convolution runs as one GEMM over all character windows, [words, positions, filters] (the layout
        # in which the max over positions reads contiguous rows): faster than Conv1d on CPU, same numbers. Max
        # over positions first, then the activation (the bilm-tf order). A window is its characters one after
        # another (width, then char dim), as they lie in `chars`: an exported graph then needs no transpose of the
        # windows, and the weight is reordered to match.
        filters = []
        for conv in self.convolutions:
            n_filters, char_dim, width = conv.weight.shape
            # [words, positions, width * char dim]; contiguous, or the GEMM reads the overlapping windows slowly
            windows = chars.unfold(1, width, 1).transpose(2, 3).flatten(2).contiguous()
            weight = conv.weight.transpose(1, 2).reshape(n_filters, width * char_dim)
            scores = self.linear(windows, weight, conv.bias)
            filters.append(self.activation(scores.amax(dim=1)))
        x = torch.cat(filters, dim=-1)
        for highway in self.highways:
            x = highway(x)
        return self.projection(torch.cat([*words, x], dim=-1) if words else x)


def lstm_cell(gates, c, cell_clip):
    """The LSTM cell update from the gate pre-activations `x W_x + h W_h + b` (i, f, g, o): returns the new (clipped)
    cell state and the cell output `o * tanh(c)` that the projection turns into h. The gates are summed in the GEMMs'
    dtype, the cell state kept in its own (float32 under bf16); the output goes back to the GEMMs' dtype. Training
    runs this; inference its in-place form, `kernels_elmo.inplace_lstm_cell`."""
    i, f, g, o = gates.to(c.dtype).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    if cell_clip is not None:
        c = c.clamp(-cell_clip, cell_clip)
    return c, (torch.sigmoid(o) * torch.tanh(c)).to(gates.dtype)


class ElmoLstmLayer(nn.Module):
    """One biLM layer: a forward and a backward LSTM with cell projection and clipping, advanced together.

    Both directions' weights are stacked on dim 0 (0 = forward, 1 = backward) and kept in `x @ W` orientation, so
    one batched matmul serves both directions. Gate blocks along 4H are ordered i, f, g, o (as `torch.nn.LSTM`);
    `bias` already includes the +1 forget bias that TensorFlow adds at run time. (transformers' models build it as
    their GradientCheckpointingLayer, `modeling_elmo.ElmoLstmLayer`: `ElmoBiLm`'s `lstm_layer`.)
    """

    def __init__(self, config, input_size):
        super().__init__()
        hidden, proj = config.lstm_dim, config.projection_dim
        self.input_weight = nn.Parameter(torch.empty(2, input_size, 4 * hidden))
        self.state_weight = nn.Parameter(torch.empty(2, proj, 4 * hidden))
        self.bias = nn.Parameter(torch.empty(2, 1, 4 * hidden))
        self.projection_weight = nn.Parameter(torch.empty(2, hidden, proj))
        self.config = config
        # chosen once (config.float_kernel); `quantize_lstm_int8` puts int8 ones in their place
        self.gemms = float_gemms(self, float_kernel(config.float_kernel))

    def quantize_lstm_int8(self, kernel="auto"):
        """Replace the float GEMM weights (input, state, projection, and the bias the input GEMM adds) by int8 ones,
        for the int8 `kernel` (`kernels_elmo.int8_kernel`)."""
        self.gemms = int8_gemms(self, int8_kernel(kernel))
        del self.input_weight, self.state_weight, self.bias, self.projection_weight

    def forward(self, inputs, batch_sizes, state=None):
        """
        inputs: [2, B, T, D], the forward stream and the per-sentence reversed backward stream, sentences sorted by
            length (longest first) and left-aligned.
        batch_sizes: Python ints, how many sentences are still running at each step (non-increasing); or, when
            exporting a graph, those counts for all T steps as a tensor, run by `kernels_elmo.scan_lstm`.
        state: optional initial `(h [2, B, P], c [2, B, H])` in the same sentence order; zeros when None.
        Returns the outputs [2, B, T, P] (zeros past each sentence's end) and each sentence's final `(h, c)`.
        Finished sentences leave the batch, so padded steps are never computed. In bf16/fp16 the cell state is
        kept in float32: it accumulates over all steps, the GEMMs do not.
        """
        _, batch, steps, _ = inputs.shape
        hidden, proj = self.config.lstm_dim, self.config.projection_dim
        cell_dtype = torch.float32 if inputs.dtype in (torch.bfloat16, torch.float16) else inputs.dtype
        if state is None:
            h, c = inputs.new_zeros(2, batch, proj), inputs.new_zeros(2, batch, hidden, dtype=cell_dtype)
        else:
            h, c = state[0].to(inputs.dtype), state[1].to(cell_dtype)
        int8 = isinstance(self.gemms, Int8Gemms)
        if int8 and self.training:
            raise RuntimeError(
                "int8 weights are for inference only: call model.eval(), or load the model without "
                "quantization_config to train it"
            )
        with torch.no_grad() if int8 else contextlib.nullcontext():  # int8 never trains: no autograd, as no_grad()
            if torch.is_tensor(batch_sizes):  # export traces torch's own ops
                inputs, h, c = inputs.detach(), h.detach(), c.detach()  # an exported graph infers (see export_gemms)
                return scan_lstm(export_gemms(self), inputs, batch_sizes, h, c, lstm_cell, self.config)
            return self._recurrence(inputs, batch_sizes, h, c)

    def _recurrence(self, inputs, batch_sizes, h, c):
        """The time steps of `forward`, from the initial state (h, c). Where a gradient is wanted, torch's own
        differentiable GEMMs and cell; elsewhere (inference, a frozen biLM) the in-place cell and, on the CPU, the
        chosen kernels."""
        batch, steps, proj = inputs.shape[1], inputs.shape[2], self.config.projection_dim
        grad = wants_grad(inputs, h, c, *self.parameters(recurse=False))
        cell = lstm_cell if grad else inplace_lstm_cell
        gemms = self.gemms.for_call(onednn_runs(inputs, grad))
        block = gates_block_steps(self.config, batch)
        # Outputs and final states are collected in lists, not written into preallocated tensors: in training, each
        # in-place write (or slice of one large tensor) would cost a full-size gradient buffer per step.
        outputs, finished = [], []
        for t, n in enumerate(batch_sizes):
            if t % block == 0:  # x W_x + b for the next block of steps, as one GEMM
                input_gates = gemms.input_gates(inputs[:, :n, t : t + block])
            if n < h.shape[1]:  # sentences n.. have ended: keep their final state
                finished.append((h[:, n:], c[:, n:]))
                h, c = h[:, :n], c[:, :n]
            h, c = lstm_step(gemms, input_gates, t % block, h, c, cell, self.config)
            outputs.append(h if n == batch else F.pad(h, (0, 0, 0, batch - n)))
        finished.append((h, c))
        final_h = torch.cat([h for h, _ in reversed(finished)], dim=1)  # back to sentence order
        final_c = torch.cat([c for _, c in reversed(finished)], dim=1)
        outputs += [h.new_zeros(2, batch, proj)] * (steps - len(batch_sizes))
        return torch.stack(outputs, dim=2), (final_h, final_c)


class ElmoBiLm(nn.Module):
    """The biLM: char CNN token embeddings, then `n_layers` bidirectional LSTM layers (each a `lstm_layer`)."""

    def __init__(self, config, lstm_layer=ElmoLstmLayer):
        super().__init__()
        self.char_cnn = ElmoCharacterEncoder(config)
        self.layers = nn.ModuleList(lstm_layer(config, config.projection_dim) for _ in range(config.n_layers))
        self.use_skip_connections = config.use_skip_connections
        self.token_cache = None  # (char-id row bytes -> index, embeddings [V, P]), see ElmoModel.cache_token_embeddings

    def embed_tokens(self, char_ids, mask):
        """Token embeddings [B, S, P], zeros where `mask` is False. Each distinct word is encoded once per call, or
        looked up in the token cache (in eval mode) when one is attached. An exported graph runs the same code
        (ONNX `Unique`): padding is not encoded there either."""
        words, inverse = torch.unique(char_ids[mask], dim=0, return_inverse=True)
        if self.token_cache is not None and not self.training:
            embedded = self._cached_char_cnn(words)
        else:
            embedded = self.char_cnn(words)
        # Each position's row of `embedded`; padding reads an appended zero row. (A gather by position, not a
        # masked_scatter, which a graph runs element by element.)
        rows = torch.full_like(mask, words.shape[0], dtype=torch.long).index_put((mask,), inverse)
        return torch.cat([embedded, embedded.new_zeros(1, embedded.shape[-1])])[rows]

    def _cached_char_cnn(self, words):
        """The char CNN of `words` [U, C], taking cached rows from the token cache and computing only the others."""
        index, table = self.token_cache
        found = [index.get(row.tobytes(), -1) for row in words.long().cpu().numpy()]
        missing = [u for u, row in enumerate(found) if row < 0]
        embedded = table[[max(row, 0) for row in found]].to(self.char_cnn.projection.weight.dtype)
        if missing:
            embedded[missing] = self.char_cnn(words[missing])
        return embedded

    def forward(self, char_ids, lengths, initial_state=None, return_state=False):
        """
        char_ids: [B, S, C] with BOS/EOS already added; lengths: [B] words per sentence including BOS/EOS.
        initial_state: optional per-layer `(h [2, B, P], c [2, B, H])` to start from (zeros when None).
        Returns the n_layers + 1 biLM layers, each [B, S, 2P] with zeros past each sentence's end, and with
        `return_state` also the per-layer final states (what `initial_state` takes for the next window).
        """
        steps = char_ids.shape[1]
        positions = torch.arange(steps, device=char_ids.device)
        mask = positions < lengths.unsqueeze(1)
        embedding = self.embed_tokens(char_ids, mask)

        sorted_lengths, order = lengths.sort(descending=True)
        running = (sorted_lengths.unsqueeze(0) > positions.unsqueeze(1)).sum(1)  # [S] sentences at each step
        # Eager runs only the steps some sentence needs; an exported graph takes the counts as a tensor (a loop).
        batch_sizes = running if torch.compiler.is_exporting() else running[running > 0].tolist()
        # reverse[b, t] reads sentence b backwards within its own length; padded positions map to themselves.
        reverse = torch.where(mask[order], sorted_lengths.unsqueeze(1) - 1 - positions, positions)
        stream = embedding[order]
        stream = torch.stack([stream, stream.gather(1, reverse.unsqueeze(-1).expand_as(stream))])

        layers = [torch.cat([embedding, embedding], dim=-1)]
        unsort = order.argsort()
        final_states = []
        for index, layer in enumerate(self.layers):
            state = None if initial_state is None else tuple(s[:, order] for s in initial_state[index])
            output, state = layer(stream, batch_sizes, state)
            final_states.append(tuple(s[:, unsort] for s in state))
            if index > 0 and self.use_skip_connections:
                output = output + stream
            stream = output
            backward = output[1].gather(1, reverse.unsqueeze(-1).expand_as(output[1]))
            layers.append(torch.cat([output[0], backward], dim=-1)[unsort])
        return (layers, final_states) if return_state else layers


class ElmoScalarMix(nn.Module):
    """`gamma * sum_j softmax(w)_j * layer_j`, optionally layer-normalising each layer first (AllenNLP ScalarMix).

    With `fixed_parameters` (AllenNLP's `scalar_mix_parameters`) the weights are those constants and gamma is 1,
    neither trained nor stored.
    """

    def __init__(self, num_layers, do_layer_norm, fixed_parameters=None):
        super().__init__()
        self.do_layer_norm = do_layer_norm
        self.fixed_parameters = fixed_parameters
        if fixed_parameters is None:
            self.scalar_parameters = nn.Parameter(torch.empty(num_layers))
            self.gamma = nn.Parameter(torch.empty(1))
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self):
        """AllenNLP's start: weights 0 (the plain average of the layers), gamma 1."""
        if self.fixed_parameters is None:
            self.scalar_parameters.zero_()
            self.gamma.fill_(1.0)

    def forward(self, layers, mask):
        if self.fixed_parameters is None:
            weights, gamma = torch.softmax(self.scalar_parameters, dim=0), self.gamma
        else:
            weights, gamma = torch.softmax(layers[0].new_tensor(self.fixed_parameters), dim=0), 1.0
        if self.do_layer_norm:
            layers = [self._layer_norm(layer, mask) for layer in layers]
        return gamma * sum(w * layer for w, layer in zip(weights, layers))

    @staticmethod
    def _layer_norm(layer, mask):
        """AllenNLP's rule: one mean and variance over all unmasked values of the whole batch."""
        mask = mask.unsqueeze(-1).to(layer.dtype)
        count = mask.sum() * layer.shape[-1]
        mean = (layer * mask).sum() / count
        variance = (((layer - mean) * mask) ** 2).sum() / count
        return (layer - mean) / torch.sqrt(variance + 1e-13)


def quantize_lstm_int8(model, kernel="auto"):
    """Int8 inference on CPU: the biLM's LSTM GEMMs (input, state and projection; most of its arithmetic) of every
    layer of `model` run on int8 weights, which replace the float ones (`kernels_elmo.Int8Gemms`), through the int8
    `kernel` ("auto": the rule of `kernels_elmo.best_int8_kernel`). Where that is oneDNN's (AMX), the float32 char CNN
    runs its GEMMs in bf16 (`kernels_elmo.Bf16Linear`), which the same CPU runs several times faster."""
    kernel = int8_kernel(kernel)
    for module in model.modules():
        if isinstance(module, ElmoLstmLayer):
            module.quantize_lstm_int8(kernel)
        if isinstance(module, ElmoCharacterEncoder) and kernel == "onednn":  # AMX: bf16 tiles for the char CNN too
            module.use_linear(Bf16Linear())


class ElmoModelMixin:
    """The ELMo vectors of char ids, for a module holding `config`, the biLM `bilm`, the `scalar_mixes` and their
    `dropout` (`add_elmo`): `ElmoModelCore` here and transformers' `ElmoModel`. `output_class` is what `forward`
    returns, `lstm_layer` what the biLM's layers are."""

    output_class = ElmoOutput
    lstm_layer = ElmoLstmLayer

    def add_elmo(self, config):
        self.bilm = ElmoBiLm(config, self.lstm_layer)
        self.scalar_mixes = nn.ModuleList(
            ElmoScalarMix(config.n_layers + 1, config.do_layer_norm, config.scalar_mix_parameters)
            for _ in range(config.num_output_representations)
        )
        self.dropout = nn.Dropout(config.dropout)

    def _check_inputs(self, input_ids, attention_mask, lstm_state=None):
        """Every check of the biLM's inputs, in one place: refuses malformed inputs by name; returns the char ids as
        int64 and the word mask [B, T] (a word counts where its char ids are not all padding and `attention_mask`,
        if given, is 1)."""
        chars = self.config.input_width
        if not torch.is_tensor(input_ids):
            raise TypeError(
                f"input_ids must be a torch.Tensor of char ids [batch, words, {chars}], "
                f"got {type(input_ids).__name__}: "
                "call the tokenizer with return_tensors='pt'"
            )
        if input_ids.dim() != 3 or input_ids.shape[-1] != chars:
            raise ValueError(
                f"input_ids must have shape [batch, words, {chars}] (char ids from ElmoTokenizer), got "
                f"{list(input_ids.shape)}"
            )
        if input_ids.shape[0] == 0:
            raise ValueError("empty batch: input_ids has no sentences")
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must hold integer char ids, got dtype {input_ids.dtype}")
        tables = (self.bilm.char_cnn.char_embedding, self.bilm.char_cnn.word_embedding)
        largest = max(table.num_embeddings for table in tables if table is not None)
        if torch.iinfo(input_ids.dtype).max < largest - 1:
            raise ValueError(
                f"input_ids of dtype {input_ids.dtype} cannot hold this model's ids (up to {largest - 1}), "
                "so they were "
                "cut before they got here: keep the tokenizer's torch.long (return_tensors='pt')"
            )
        input_ids = input_ids.long()
        # An exported graph (ONNX) checks shapes and dtypes, not values: those checks read the data.
        values = not torch.compiler.is_exporting()
        if values:
            self.bilm.char_cnn.check_ids(input_ids)
        if attention_mask is not None:
            if not torch.is_tensor(attention_mask):
                raise TypeError(f"attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}")
            if attention_mask.shape != input_ids.shape[:2]:
                raise ValueError(
                    f"attention_mask must have shape [batch, words] = {list(input_ids.shape[:2])} like input_ids, got "
                    f"{list(attention_mask.shape)}"
                )
            binary = attention_mask.dtype == torch.bool
            if values and not (binary or ((attention_mask == 0) | (attention_mask == 1)).all()):
                raise ValueError(
                    "attention_mask must hold 1 for words and 0 for padding (or True and False), got values such as "
                    f"{attention_mask[(attention_mask != 0) & (attention_mask != 1)][:3].tolist()}"
                )
        mask = word_mask(input_ids, attention_mask)
        positions = torch.arange(mask.shape[1], device=mask.device)
        if values and not torch.equal(mask, positions < mask.sum(dim=1, keepdim=True)):
            raise ValueError("padding must be on the right: every sentence's words must come first, then padding")
        if lstm_state is not None:
            batch, P, H = input_ids.shape[0], self.config.projection_dim, self.config.lstm_dim
            shapes = [(2, batch, P), (2, batch, H)]
            if not (
                isinstance(lstm_state, (tuple, list))
                and len(lstm_state) == self.config.n_layers
                and all(isinstance(layer, (tuple, list)) and len(layer) == 2 for layer in lstm_state)
                and all(
                    torch.is_tensor(s) and s.is_floating_point() and tuple(s.shape) == shape
                    for layer in lstm_state
                    for s, shape in zip(layer, shapes)
                )
            ):
                raise ValueError(
                    f"lstm_state must be the lstm_state output of a previous call of this model on the same number of "
                    f"texts: {self.config.n_layers} pairs (h {list(shapes[0])}, c {list(shapes[1])}) of float tensors"
                )
        return input_ids, mask

    def _add_sentence_boundaries(self, input_ids, mask):
        """Adds BOS before and EOS after each sentence: returns ids [B, T + 2, C], lengths [B]."""
        lengths = mask.sum(dim=1)
        batch, words, chars = input_ids.shape
        bos, eos = (input_ids.new_tensor(ids) for ids in sentence_boundary_ids(self.config))
        with_boundaries = input_ids.new_zeros(batch, words + 2, chars)
        with_boundaries[:, 1 : words + 1] = input_ids * mask.unsqueeze(-1)
        with_boundaries[:, 0] = bos
        with_boundaries[torch.arange(batch, device=input_ids.device), lengths + 1] = eos
        return with_boundaries, lengths + 2

    @torch.no_grad()
    def cache_token_embeddings(self, words, batch_size=2048):
        """Precompute the context-free token embeddings (char CNN + highway + projection) of `words`, a list of
        strings, so that inference looks them up instead of running the char CNN (AllenNLP's `vocab_to_cache`,
        bilm-tf's `dump_token_embeddings`). Words outside the list are still encoded on the fly; results are the
        same either way. Used in eval mode only (training ignores it); the cache is not saved with the model and
        goes stale if the char CNN weights change. `words=None` drops it."""
        if words is None:
            self.bilm.token_cache = None
            return
        if self.config.sentence_boundary_ids is not None:
            raise ValueError(
                "cache_token_embeddings maps words by the UTF-8 byte rules; this model reads vocabulary ids"
            )
        chars = self.config.max_characters_per_token
        rows = list(dict.fromkeys([BOS_WORD, EOS_WORD, *words]))
        device = self.bilm.char_cnn.projection.weight.device
        char_ids = torch.tensor([word_to_char_ids(w, chars) for w in rows], device=device)
        table = torch.cat([self.bilm.char_cnn(chunk) for chunk in char_ids.split(batch_size)])
        index = {row.tobytes(): i for i, row in enumerate(char_ids.cpu().numpy())}
        self.bilm.token_cache = (index, table)

    def bilm_layers(self, input_ids, attention_mask=None, lstm_state=None, output_hidden_states=None):
        """The biLM layers with BOS and EOS kept, for heads that need the boundary positions (the LM head).

        Returns (layers, each [B, words + 2, 2P]; the final LSTM state of each layer (see `lstm_state` in
        `forward`); word mask [B, words]; lengths [B] including BOS and EOS; the hidden states with
        `output_hidden_states` (None: `config.output_hidden_states`), else None: see `word_layers`).
        """
        input_ids, mask = self._check_inputs(input_ids, attention_mask, lstm_state)
        char_ids, lengths = self._add_sentence_boundaries(input_ids, mask)
        layers, final_state = self.bilm(char_ids, lengths, initial_state=lstm_state, return_state=True)
        hidden_states = None
        if (
            output_hidden_states
            if output_hidden_states is not None
            else getattr(self.config, "output_hidden_states", False)
        ):
            hidden_states, layers = self.word_layers(layers, mask)
        return layers, final_state, mask, lengths, hidden_states

    @staticmethod
    def word_layers(layers, mask):
        """The hidden states: each biLM layer at the words, [B, words, 2P] (BOS/EOS removed, zeros at padding); and
        the layers [B, words + 2, 2P] made again from them, the same values, so that every output computed from the
        layers is on the hidden states' gradient path (their `.grad` after backward, as attribution tools read)."""
        words = mask.shape[1]
        keep = mask.unsqueeze(-1).to(layers[0].dtype)
        hidden_states = tuple(layer[:, 1 : words + 1] * keep for layer in layers)
        positions = torch.arange(words + 2, device=mask.device)  # the words are at 1..n (padding is on the right)
        at_words = ((positions >= 1) & (positions <= mask.sum(dim=1, keepdim=True))).unsqueeze(-1)
        layers = [
            torch.where(at_words, F.pad(hidden, (0, 0, 1, 1)), layer) for hidden, layer in zip(hidden_states, layers)
        ]
        return hidden_states, layers

    def forward(
        self,
        input_ids,
        attention_mask=None,
        output_hidden_states=None,
        lstm_state=None,
        return_lstm_state=False,
        output_attentions=None,
        return_dict=None,
    ):
        r"""
        input_ids (`torch.LongTensor` of shape `(batch, words, max_characters_per_token)`):
            Char ids from `ElmoTokenizer` (AllenNLP's `batch_to_ids`); an all-zero row is padding.
        attention_mask (`torch.Tensor` of shape `(batch, words)`, *optional*):
            1 for words, 0 for padding. A word counts only where both its char ids and this mask say so.
        lstm_state (*optional*):
            The `lstm_state` output of the previous window of the same texts: the biLM starts from it instead of
            zeros (stateful mode, see `forward_windows`). The default is stateless.
        return_lstm_state (`bool`, *optional*, defaults to `False`): also return the final LSTM states.
        output_attentions (`bool`, *optional*): accepted for the common encoder API; ELMo has no attention, so True is
            an error.
        return_dict (`bool`, *optional*): transformers' `ElmoModel` returns a tuple with False; here it is accepted
            for the same calls, and the output is `output_class` either way.
        """
        flags = dict(
            output_hidden_states=output_hidden_states,
            return_lstm_state=return_lstm_state,
            output_attentions=output_attentions,
        )
        for name, value in flags.items():
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be True, False or None, got {value!r}")
        if output_attentions:
            raise ValueError("ELMo has no attention layers: output_attentions=True is not supported")
        layers, final_state, mask, lengths, hidden_states = self.bilm_layers(
            input_ids, attention_mask, lstm_state, output_hidden_states
        )
        words = input_ids.shape[1]
        boundary_mask = torch.arange(words + 2, device=mask.device) < lengths.unsqueeze(1)
        keep = mask.unsqueeze(-1).to(layers[0].dtype)
        representations = tuple(
            self.dropout(mix(layers, boundary_mask)[:, 1 : words + 1] * keep) for mix in self.scalar_mixes
        )
        return self.output_class(
            last_hidden_state=representations[0],
            elmo_representations=representations,
            hidden_states=hidden_states,
            mask=mask,
            lstm_state=tuple(final_state) if return_lstm_state else None,
        )

    def forward_windows(self, input_ids, window_size, **kwargs):
        """Stateful mode for one long text: yields one `output_class` per window of `window_size` words.

        `input_ids` is `[words, C]` or `[1, words, C]`. Each window is a sentence of its own (with BOS/EOS), and
        every LSTM starts from the previous window's final state, as bilm-tf's and AllenNLP's stateful inference
        do: the forward LM continues exactly; the backward LM starts from where it stopped in the previous window
        (a carried approximation, not the right-hand context). Memory depends on `window_size`, not on the text's
        length; the first window equals a stateless call. Other keyword arguments go to `forward`.
        """
        if input_ids.dim() == 3 and input_ids.shape[0] == 1:
            input_ids = input_ids[0]
        if input_ids.dim() != 2:
            raise ValueError(
                f"forward_windows takes one text, input_ids [words, C] or [1, words, C]; got {list(input_ids.shape)}"
            )
        if not (isinstance(window_size, int) and window_size > 0):
            raise ValueError(f"window_size must be a positive int, got {window_size!r}")
        state = None
        for start in range(0, input_ids.shape[0], window_size):
            out = self(
                input_ids[None, start : start + window_size],
                lstm_state=state,
                return_lstm_state=True,
                return_dict=True,
                **kwargs,
            )
            state = out.lstm_state
            yield out


# Logits of the full softmax held at once (rows x vocabulary, 16 MB in float32): evaluation and log-probabilities
# go through the softmax in chunks of this many values, so memory does not grow with batch x words x vocabulary.
SOFTMAX_CHUNK_VALUES = 1 << 22


class ElmoLanguageModelMixin:
    """The language model's scores, for a module holding `config`, the ELMo model `elmo` (its biLM), the softmax
    `lm_softmax` (bilm-tf's softmax_W/softmax_b, shared by both directions) and its input `dropout` (`add_softmax`):
    `ElmoLanguageModelCore` here and transformers' `ElmoForLanguageModeling`."""

    def add_softmax(self, config):
        if config.lm_vocab_size is None:
            raise ValueError(
                "ElmoForLanguageModeling needs config.lm_vocab_size, the size of the word vocabulary: pass "
                "lm_vocab_size=tokenizer.vocab_size (the lines of vocab.txt) to from_pretrained or to ElmoConfig"
            )
        self.dropout = nn.Dropout(config.lm_dropout)
        self.lm_softmax = nn.Linear(config.projection_dim, config.lm_vocab_size)

    def check_vocabulary(self, tokenizer):
        """Raise ValueError unless `tokenizer`'s word vocabulary (vocab.txt) has one word per softmax row: a longer
        or shorter file loads, then gives ids past the softmax or words the softmax never scored."""
        if tokenizer.vocab_size != self.config.lm_vocab_size:
            raise ValueError(
                f"the tokenizer's word vocabulary has {tokenizer.vocab_size:,} words (vocab.txt) but the language "
                f"model's softmax has {self.config.lm_vocab_size:,} (lm_vocab_size in config.json): they must be the "
                "vocabulary the model was trained with; restore that vocab.txt"
            )

    def lm_states(self, input_ids, attention_mask=None):
        """The top biLM layer where the softmax reads it: forward states [B, words + 1, P] at `<S>, w_0 .. w_{n-1}`
        (predicting `w_0 .. w_{n-1}, </S>`), backward states [B, words + 1, P] at `w_0 .. w_{n-1}, </S>`
        (predicting `<S>, w_0 .. w_{n-1}`), after `lm_dropout`; and the lengths [B] with `<S>` and `</S>`."""
        return self._lm_states(input_ids, attention_mask, output_hidden_states=False)[:3]

    def _lm_states(self, input_ids, attention_mask, output_hidden_states):
        """`lm_states` and the hidden states (`ElmoModel.bilm_layers`)."""
        layers, _, _, lengths, hidden_states = self.elmo.bilm_layers(
            input_ids, attention_mask, output_hidden_states=output_hidden_states
        )
        top = self.dropout(layers[-1])
        size, words = self.config.projection_dim, input_ids.shape[1]
        return top[:, : words + 1, :size], top[:, 1:, size:], lengths, hidden_states

    def softmax_chunk_rows(self):
        """Rows of hidden states sent through the full softmax at once (see `SOFTMAX_CHUNK_VALUES`)."""
        return max(1, SOFTMAX_CHUNK_VALUES // self.config.lm_vocab_size)

    def lm_log_probs(self, hidden):
        """log P(word | state) over the whole vocabulary, [N, lm_vocab_size] float32, for states `hidden` [N, P]:
        the softmax runs over a few rows at a time, so only the result is vocabulary-sized."""
        if len(hidden) == 0:
            return hidden.new_zeros(0, self.config.lm_vocab_size, dtype=torch.float32)
        chunks = hidden.split(self.softmax_chunk_rows())
        return torch.cat([F.log_softmax(self.lm_softmax(h).float(), dim=-1) for h in chunks])

    def masked_word_log_probs(self, input_ids, attention_mask=None, positions=None):
        """LAMA's bidirectional score of every vocabulary word at one word position per sentence: the mean of the
        forward LM's log-probability (from the words to its left) and the backward LM's (from the words to its
        right), [B, lm_vocab_size]. The word at the position itself is never read, so any word may stand there
        (the tokenizer's `mask_token`). `positions` [B] (or one int for all) are 0-based word indices."""
        forward_states, backward_states, lengths = self.lm_states(input_ids, attention_mask)
        positions = torch.as_tensor(positions, device=forward_states.device).long()
        positions = positions.expand(len(lengths)) if positions.dim() == 0 else positions
        if positions.shape != lengths.shape or (positions < 0).any() or (positions >= lengths - 2).any():
            raise ValueError("positions must hold one word index per sentence, within the sentence")
        rows = torch.arange(len(positions), device=positions.device)
        # Forward state j (after <S>, w_0 .. w_{j-1}) and backward state j + 1 (before w_{j+1} .. </S>) predict word j.
        forward = self.lm_log_probs(forward_states[rows, positions])
        return 0.5 * (forward + self.lm_log_probs(backward_states[rows, positions + 1]))

    def masked_word_scores(self, input_ids, attention_mask=None, positions=None):
        """The fill-mask scores (LAMA's rule): the log of each word's exp(`masked_word_log_probs`) normalised over the
        vocabulary, so that the scores of all words sum to 1, [B, lm_vocab_size]."""
        mean = self.masked_word_log_probs(input_ids, attention_mask, positions)
        return mean - mean.logsumexp(dim=-1, keepdim=True)

    @staticmethod
    def best_words(log_scores, top_k, excluded=(), candidates=None):
        """[(word id, probability)] of the `top_k` best words of one text's `log_scores` [lm_vocab_size], best first:
        among `candidates` (word ids; default: every word but those of `excluded`)."""
        if candidates is None:
            log_scores = log_scores.clone()
            log_scores[list(excluded)] = float("-inf")
            candidates = torch.arange(len(log_scores))
            top_k = min(top_k, len(log_scores) - len(set(excluded)))
        else:
            candidates = torch.as_tensor(candidates)
            log_scores, top_k = log_scores[candidates], min(top_k, len(candidates))
        values, order = log_scores.topk(top_k)
        return [(int(candidates[index]), math.exp(value)) for value, index in zip(values.tolist(), order.tolist())]


class ElmoCore(nn.Module):
    """What a core answers as transformers' models do: its `device` and `dtype` (those of its weights), and whether
    its LSTM runs on int8 weights (`is_quantized`)."""

    @property
    def device(self):
        return next(self.parameters()).device

    @property
    def dtype(self):
        return next(p for p in self.parameters() if p.is_floating_point()).dtype

    @property
    def is_quantized(self):
        layers = [module for module in self.modules() if isinstance(module, ElmoLstmLayer)]
        return any(isinstance(layer.gemms, Int8Gemms) for layer in layers)


class ElmoModelCore(ElmoModelMixin, ElmoCore):
    """`ElmoModel` without transformers: the same weights (`bilm.*`, `scalar_mixes.*`), inputs and outputs
    (`ElmoOutput`), for inference (`model_source.load_model` loads it; `config` is an `options_elmo.ElmoOptions`)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.add_elmo(config)


class ElmoLanguageModelCore(ElmoLanguageModelMixin, ElmoCore):
    """`ElmoForLanguageModeling` without transformers, for scoring words (`lm_log_probs`, `masked_word_log_probs`):
    the same weights (`elmo.*`, `lm_softmax.*`)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.elmo = ElmoModelCore(config)
        self.add_softmax(config)
