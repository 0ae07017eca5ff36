"""ELMo (Peters et al., 2018, "Deep contextualized word representations") for transformers: `ElmoModel`, the language
model `ElmoForLanguageModeling` and the task heads, as transformers' PreTrainedModel classes (`from_pretrained`,
Trainer, the Hub, pipelines).

The biLM itself, its scalar mixes and the language model's scores are `bilm_elmo.py`'s (plain torch, the paper's
order): the classes here add what transformers needs (weight initialisation, loading, outputs as ModelOutput) and
what training needs (the language model's losses, the heads).
"""

import filecmp
import math
import os
import shutil
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput, can_return_tuple, cached_file, logging

try:  # loaded as remote code, the modules are one package
    from .bilm_elmo import (
        ElmoHighway,
        ElmoLanguageModelMixin,
        ElmoModelMixin,
        ElmoOutput,
        ElmoScalarMix,
        masked_mean,
        quantize_lstm_int8,
    )
    from .bilm_elmo import ElmoLstmLayer as PlainElmoLstmLayer
    from .configuration_elmo import ELMO_AUTO_MAP, LICENCE_FILE, ElmoConfig
    from .quantization_elmo import ElmoInt8Config  # noqa: F401 - registers the int8 quantizer with transformers
except ImportError:  # installed with pip, they are top-level modules
    from bilm_elmo import (
        ElmoHighway,
        ElmoLanguageModelMixin,
        ElmoModelMixin,
        ElmoOutput,
        ElmoScalarMix,
        masked_mean,
        quantize_lstm_int8,
    )
    from bilm_elmo import ElmoLstmLayer as PlainElmoLstmLayer
    from configuration_elmo import ELMO_AUTO_MAP, LICENCE_FILE, ElmoConfig
    from quantization_elmo import ElmoInt8Config  # noqa: F401

logger = logging.get_logger(__name__)


@dataclass
class ElmoModelOutput(ModelOutput, ElmoOutput):
    """`bilm_elmo.ElmoOutput` (its fields are documented there) as transformers' ModelOutput."""


class ElmoLstmLayer(GradientCheckpointingLayer, PlainElmoLstmLayer):
    """`bilm_elmo.ElmoLstmLayer` as transformers' GradientCheckpointingLayer: with activation checkpointing on (a
    Trainer's `activation_checkpointing`), a layer in training recomputes its forward pass in the backward one."""


class ElmoPreTrainedModel(PreTrainedModel):
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["ElmoLstmLayer", "ElmoCharacterEncoder"]
    # A language-model checkpoint (the shipped model) also holds the word softmax, which only ElmoForLanguageModeling
    # uses: loading the encoder or a task head from it leaves it out by design, not by accident.
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)lm_softmax\."]
    # A scalar mix the checkpoint lacks (num_output_representations=2 on a folder saved with one, a converted biLM)
    # starts as AllenNLP's Elmo starts every mix (weights 0, gamma 1): new by design, not a loading accident.
    _keys_to_ignore_on_load_missing = [r"(^|\.)scalar_mixes\."]

    def frozen_modules(self):
        """Submodules this model never trains (heads override it)."""
        return []

    def apply_freezing(self):
        """Set `requires_grad=False` on `frozen_modules()`. Called at construction and again after loading."""
        for module in self.frozen_modules():
            module.requires_grad_(False)

    def quantize_lstm_int8(self, kernel="auto"):
        """Int8 inference on CPU (`bilm_elmo.quantize_lstm_int8`), called by the int8 quantizer (`from_pretrained(...,
        quantization_config=ElmoInt8Config())`, see quantization_elmo.py)."""
        quantize_lstm_int8(self, kernel)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        # Loading replaces the parameters by new, trainable ones: re-apply the freezing.
        loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        model.apply_freezing()
        where = {
            name: kwargs[name] for name in ("cache_dir", "revision", "token", "local_files_only") if name in kwargs
        }
        licence = cached_file(
            pretrained_model_name_or_path,
            LICENCE_FILE,
            **where,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )
        folder = str(pretrained_model_name_or_path)
        if licence and os.path.isdir(folder) and (os.path.islink(licence) or not os.path.isfile(licence)):
            logger.warning(
                f"{licence} is not a regular file of {folder} (a link or a folder): save_pretrained will not copy it"
            )
            licence = None
        model.licence_file = licence
        return loaded

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' `save_pretrained`, and the licence file (LICENCE_FILE) of the folder or repo the weights
        were loaded from: the licences of the texts weights were trained on travel with every model derived from
        them. A licence file already in `save_directory` that differs is kept, with a warning."""
        super().save_pretrained(save_directory, *args, **kwargs)
        source, target = getattr(self, "licence_file", None), os.path.join(save_directory, LICENCE_FILE)
        if not source or not os.path.isfile(source):
            return
        if os.path.lexists(target):
            if not (os.path.isfile(target) and filecmp.cmp(source, target, shallow=False)):
                logger.warning(
                    f"{target} is kept: it is not the licence file the weights came with ({source}); "
                    "put that one beside the weights yourself if it applies"
                )
            return
        shutil.copyfile(source, target)

    @torch.no_grad()
    def _init_weights(self, module):
        """bilm-tf's initialisation, for training from scratch (converted and saved weights overwrite it).

        Dispatch is on modules that own parameters directly: transformers skips the others in remote code.
        """
        config = self.config
        if isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -1.0, 1.0)
            init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.Conv1d):
            if config.activation == "relu":
                init.normal_(module.weight, std=(1.0 / (module.kernel_size[0] * module.in_channels)) ** 0.5)
            else:
                init.uniform_(module.weight, -0.05, 0.05)
            init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            init.normal_(module.weight, std=(1.0 / module.in_features) ** 0.5)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, ElmoHighway):
            init.normal_(module.weight, std=(1.0 / module.weight.shape[1]) ** 0.5)
            size = module.weight.shape[1]
            init.zeros_(module.bias[:size])
            init.constant_(module.bias[size:], -2.0)  # carry gates start mostly closed
        elif isinstance(module, ElmoLstmLayer):
            for weight in (module.input_weight, module.state_weight, module.projection_weight):
                bound = (6.0 / (weight.shape[1] + weight.shape[2])) ** 0.5  # Glorot uniform, per direction
                init.uniform_(weight, -bound, bound)
            hidden = config.lstm_dim
            init.zeros_(module.bias)
            init.ones_(module.bias[..., hidden : 2 * hidden])  # forget bias
        elif isinstance(module, ElmoScalarMix) and module.fixed_parameters is None:
            init.zeros_(module.scalar_parameters)
            init.ones_(module.gamma)
        elif isinstance(module, nn.LSTM):  # the task encoder: PyTorch's own default
            bound = 1.0 / module.hidden_size**0.5
            for weight in module.parameters():
                init.uniform_(weight, -bound, bound)


class ElmoModel(ElmoModelMixin, ElmoPreTrainedModel):
    """The ELMo biLM and its scalar mixes: char ids [batch, words, chars] -> ELMo vectors [batch, words, 2P]
    (`bilm_elmo.ElmoModelMixin`)."""

    output_class = ElmoModelOutput
    lstm_layer = ElmoLstmLayer

    def __init__(self, config):
        super().__init__(config)
        self.add_elmo(config)
        self.post_init()

    def get_input_embeddings(self):
        """The char embedding (the word embedding of a word-only model, `char_embedding_dim` 0)."""
        char_cnn = self.bilm.char_cnn
        return char_cnn.char_embedding if char_cnn.char_embedding is not None else char_cnn.word_embedding

    def set_input_embeddings(self, value):
        char_cnn = self.bilm.char_cnn
        if char_cnn.char_embedding is not None:
            char_cnn.char_embedding = value
        else:
            char_cnn.word_embedding = value

    @can_return_tuple
    def forward(
        self,
        input_ids,
        attention_mask=None,
        output_hidden_states=None,
        lstm_state=None,
        return_lstm_state=False,
        output_attentions=None,
    ):
        """`ElmoModelMixin.forward` (its arguments are documented there), as a ModelOutput or a tuple."""
        return super().forward(
            input_ids, attention_mask, output_hidden_states, lstm_state, return_lstm_state, output_attentions
        )


# Word id of `<S>` when the config does not give one (`config.bos_token_id`): the first line of the vocabulary
# files `elmo-transformers pretrain` builds. Converted published vocabularies set it (lm_1b's file puts `<S>` on
# line 1).
DEFAULT_BOS_ID = 0


@dataclass
class ElmoLanguageModelingOutput(ModelOutput):
    """
    Args:
        loss (`torch.FloatTensor` of shape `()`, returned with `labels`):
            `0.5 * (forward NLL + backward NLL)` per prediction; sampled softmax in training when configured.
        forward_nll, backward_nll (`torch.FloatTensor` of shape `(batch,)`, returned with `labels`):
            Summed negative log-likelihood of each sentence's predictions, per direction (sum these and
            `num_predictions` over a corpus for exact perplexities, see `lm_perplexities`).
        num_predictions (`torch.LongTensor` of shape `(batch,)`, returned with `labels`):
            Predictions per sentence and direction (labels other than -100).
        forward_perplexity, backward_perplexity, perplexity (`torch.FloatTensor` of shape `()`):
            This batch's perplexities (average = mean of the two, as the paper reports); only with the full softmax.
        forward_logits, backward_logits (`torch.FloatTensor` of shape `(batch, words + 1, lm_vocab_size)`):
            Full-softmax logits, returned without `labels`: position j of the forward LM predicts word j (word
            `words` is `</S>`), position j of the backward LM predicts word j - 1 (word -1 is `<S>`). Vocabulary-sized
            at every position: with a large vocabulary use `lm_log_probs` or `masked_word_log_probs` instead.
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            The biLM layers at the words, as `ElmoModelOutput.hidden_states`.
    """

    loss: torch.FloatTensor | None = None
    forward_nll: torch.FloatTensor | None = None
    backward_nll: torch.FloatTensor | None = None
    num_predictions: torch.LongTensor | None = None
    forward_perplexity: torch.FloatTensor | None = None
    backward_perplexity: torch.FloatTensor | None = None
    perplexity: torch.FloatTensor | None = None
    forward_logits: torch.FloatTensor | None = None
    backward_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


def lm_perplexities(forward_nll, backward_nll, num_predictions):
    """Forward, backward and average perplexity (dict of floats) from summed NLLs and prediction counts."""
    count = max(float(num_predictions.sum()), 1.0)
    forward = math.exp(float(forward_nll.sum()) / count)
    backward = math.exp(float(backward_nll.sum()) / count)
    return {"forward_perplexity": forward, "backward_perplexity": backward, "perplexity": (forward + backward) / 2}


def log_uniform_candidates(num_sampled, vocab_size, device=None):
    """TensorFlow's `log_uniform_candidate_sampler(unique=True)`, the bilm-tf sampler.

    Word k is drawn with probability `log((k + 2) / (k + 1)) / log(vocab_size + 1)` (Zipf over a vocabulary sorted
    by descending frequency); draws with replacement continue until `num_sampled` distinct words are found.
    Returns the words [num_sampled] (order of first draw) and `expected_count(ids)`, the expected number of times
    a word appears among the draws (TF's formula; the log of this is subtracted from the logits). With
    `num_sampled >= vocab_size` every word is returned with expected count 1: the sampled softmax is then exact.
    """
    if num_sampled >= vocab_size:
        return torch.arange(vocab_size, device=device), lambda ids: torch.ones(ids.shape, device=device)
    log_range = math.log(vocab_size + 1)
    draws = torch.empty(0, dtype=torch.long, device=device)
    while True:
        new = (torch.rand(2 * num_sampled, device=device, dtype=torch.float64) * log_range).exp().long() - 1
        draws = torch.cat([draws, new.clamp_(0, vocab_size - 1)])
        distinct, inverse = torch.unique(draws, return_inverse=True)
        if len(distinct) >= num_sampled:
            break
    positions = torch.arange(len(draws), device=device)
    first = torch.full_like(distinct, len(draws)).scatter_reduce_(0, inverse, positions, "amin")
    order = first.argsort()[:num_sampled]
    num_tries = int(first[order[-1]]) + 1

    def expected_count(ids):
        p = torch.log1p(1.0 / (ids.double() + 1)) / log_range
        if num_tries == num_sampled:
            return (p * num_tries).float()
        return (-torch.expm1(num_tries * torch.log1p(-p))).float()

    return distinct[order], expected_count


class ElmoForLanguageModeling(ElmoLanguageModelMixin, ElmoPreTrainedModel):
    """The biLM with its word softmax, trained as in bilm-tf: `loss = 0.5 * (forward NLL + backward NLL)`.

    Inputs stay characters; `labels` [batch, words + 1] are word ids (`ElmoTokenizer` vocabulary) of each sentence
    followed by `</S>`, padded with -100: `labels[:, j]` is the forward target at position j (position 0 = `<S>`)
    and, shifted by one with `<S>` in front, the backward targets. So each direction makes `words + 1`
    predictions per sentence, the count Trainer's `num_items_in_batch` sees (hence exact gradient accumulation).
    One softmax (`lm_softmax`, bilm-tf's softmax_W/softmax_b) is shared by both directions; training uses the sampled
    softmax when `config.lm_n_negative_samples` is set, evaluation always the full softmax. The scalar mixes are
    not used and are frozen.

    Registered under `AutoModelForPreTraining`: the biLM objective is ELMo's pre-training; it is neither a causal
    LM for generation (each direction sees only one side and the model cannot generate) nor a masked LM.
    """

    accepts_loss_kwargs = True  # the loss is normalised by Trainer's `num_items_in_batch` when given

    def __init__(self, config):
        super().__init__(config)
        self.add_softmax(config)
        self.elmo = ElmoModel(config)
        self.post_init()
        self.apply_freezing()

    def frozen_modules(self):
        return [self.elmo.scalar_mixes]  # not used by the LM objective

    def get_output_embeddings(self):
        return self.lm_softmax

    @can_return_tuple
    def forward(self, input_ids, attention_mask=None, labels=None, num_items_in_batch=None, **kwargs):
        r"""
        labels (`torch.LongTensor` of shape `(batch, words + 1)`, *optional*):
            Word ids of each sentence's words then `</S>`, -100 after; see the class docstring.
        num_items_in_batch (`int` or `torch.Tensor`, *optional*):
            Predictions per direction in the whole (accumulated) batch, given by Trainer; the loss is divided by it.
        """
        forward_states, backward_states, lengths, hidden_states = self._lm_states(
            input_ids, attention_mask, kwargs.get("output_hidden_states")
        )
        words = input_ids.shape[1]
        if labels is None:
            return ElmoLanguageModelingOutput(
                forward_logits=self.lm_softmax(forward_states),
                backward_logits=self.lm_softmax(backward_states),
                hidden_states=hidden_states,
            )

        if labels.dim() != 2 or labels.shape != (input_ids.shape[0], words + 1):
            raise ValueError(
                f"labels must have shape [batch, words + 1] = {[input_ids.shape[0], words + 1]} (each sentence's word "
                f"ids then </S>, -100 after), got {list(labels.shape)}"
            )
        forward_targets, backward_targets = self._targets(labels, lengths - 2)
        valid = forward_targets != -100
        hidden = torch.cat([forward_states[valid], backward_states[valid]])
        targets = torch.cat([forward_targets[valid], backward_targets[valid]])
        sampled = self.training and self.config.lm_n_negative_samples is not None
        nll = self._sampled_softmax_nll(hidden, targets) if sampled else self._full_softmax_nll(hidden, targets)
        sentence = valid.nonzero()[:, 0]
        forward_nll, backward_nll = nll[: len(sentence)], nll[len(sentence) :]
        count = valid.sum(dim=1)
        denominator = num_items_in_batch if num_items_in_batch is not None else count.sum().clamp(min=1)
        loss = nll.sum() / (2 * denominator)
        output = ElmoLanguageModelingOutput(
            loss=loss,
            forward_nll=nll.new_zeros(len(labels)).index_add(0, sentence, forward_nll.detach()),
            backward_nll=nll.new_zeros(len(labels)).index_add(0, sentence, backward_nll.detach()),
            num_predictions=count,
            hidden_states=hidden_states,
        )
        if not sampled:
            ppl = lm_perplexities(output.forward_nll, output.backward_nll, count)
            output.forward_perplexity, output.backward_perplexity, output.perplexity = (
                nll.new_tensor(ppl[k]) for k in ("forward_perplexity", "backward_perplexity", "perplexity")
            )
        return output

    def _targets(self, labels, lengths):
        """Check `labels` against the sentence lengths; return forward and backward targets [B, words + 1]."""
        valid = labels != -100
        if valid.any() and (labels[valid].min() < 0 or labels[valid].max() >= self.config.lm_vocab_size):
            raise ValueError(f"labels must be word ids in [0, {self.config.lm_vocab_size - 1}] or -100")
        positions = torch.arange(labels.shape[1], device=labels.device)
        if (valid & (positions > lengths.unsqueeze(1))).any():
            raise ValueError(
                "labels has targets past a sentence's end: a sentence of n words has n + 1 targets (its words, then "
                "</S>), at positions 0..n"
            )
        bos_id = self.config.bos_token_id if getattr(self.config, "bos_token_id", None) is not None else DEFAULT_BOS_ID
        bos = labels.new_full((len(labels), 1), bos_id)
        backward = torch.where(valid, torch.cat([bos, labels[:, :-1]], dim=1), -100)
        return labels, backward

    def _full_softmax_nll(self, hidden, targets):
        """Per-prediction NLL under the full softmax, in row chunks so evaluation never holds [all rows, vocab]."""
        chunks = [
            F.cross_entropy(self.lm_softmax(h).float(), t, reduction="none")
            for h, t in zip(hidden.split(self.softmax_chunk_rows()), targets.split(self.softmax_chunk_rows()))
        ]
        return torch.cat(chunks) if chunks else hidden.new_zeros(0, dtype=torch.float32)

    def _sampled_softmax_nll(self, hidden, targets):
        """TensorFlow's `sampled_softmax_loss` (bilm-tf): the true word against negatives shared by the batch.

        Logits are corrected by subtracting the log expected count of each word under the sampler; a negative equal
        to the row's true word (an accidental hit) is removed.
        """
        negatives, expected_count = log_uniform_candidates(
            self.config.lm_n_negative_samples, self.config.lm_vocab_size, hidden.device
        )
        weight, bias = self.lm_softmax.weight, self.lm_softmax.bias
        true_logits = (hidden * weight[targets]).sum(-1) + bias[targets] - expected_count(targets).log()
        negative_logits = F.linear(hidden, weight[negatives], bias[negatives]) - expected_count(negatives).log()
        negative_logits = negative_logits.masked_fill(negatives == targets.unsqueeze(1), float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), negative_logits], dim=1).float()
        return logits.logsumexp(dim=1) - logits[:, 0]


class ElmoTaskEncoder(nn.Module):
    """What task heads put on the ELMo vectors: nothing (`"linear"`) or a one-layer BiLSTM (`"lstm"`)."""

    def __init__(self, config):
        super().__init__()
        self.lstm = None
        self.output_size = config.hidden_size
        if config.task_encoder == "lstm":
            self.lstm = nn.LSTM(config.hidden_size, config.task_encoder_dim, batch_first=True, bidirectional=True)
            self.output_size = 2 * config.task_encoder_dim

    def forward(self, vectors, mask):
        if self.lstm is None:
            return vectors
        return run_bilstm(self.lstm, vectors, mask)


def run_bilstm(lstm, vectors, mask):
    """`lstm` (a batch-first `nn.LSTM`) over each sentence's words only [B, T, D] -> [B, T, out], zeros after them."""
    if vectors.shape[1] == 0:  # no sentence has a word
        return vectors.new_zeros(*vectors.shape[:2], lstm.hidden_size * (1 + lstm.bidirectional))
    lengths = mask.sum(dim=1).clamp(min=1).cpu()  # an empty sentence runs one (zero) step, then is masked
    packed = nn.utils.rnn.pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
    output, _ = nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=vectors.shape[1])
    return output * mask.unsqueeze(-1).to(output.dtype)


def masked_max(vectors, mask):
    """Max over each sentence's words [B, T, D] -> [B, D] (`mask` [B, T]); an empty sentence gives zeros."""
    if vectors.shape[1] == 0:
        return vectors.new_zeros(vectors.shape[0], vectors.shape[2])
    filled = vectors.masked_fill(~mask.unsqueeze(-1), torch.finfo(vectors.dtype).min).amax(dim=1)
    return torch.where(mask.any(dim=1, keepdim=True), filled, torch.zeros_like(filled))


def masked_softmax(scores, mask):
    """Softmax of `scores` [..., T] over the positions where `mask` [..., T] is True; all False gives zeros."""
    weights = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(dim=-1)
    return weights * mask.to(weights.dtype)


class ElmoPairEncoder(nn.Module):
    """ESIM's (Chen et al., 2017) relation of two sentences' vectors, kept small: soft alignment (each word attends
    to the other sentence's words by dot product, scaled by 1/sqrt(width) as in a Transformer: unscaled, ELMo
    vectors' products run to the hundreds and the softmax is a hard argmax that passes no gradient), the enhanced
    features `[a; ã; a - ã; a * ã]`, a ReLU projection and a BiLSTM of `config.pair_encoder_dim` per direction
    (composition), mean and max pooling of both sentences, and ESIM's tanh hidden layer, of `output_size` (the width
    the head's classifier reads). With `config.pair_alignment` False, ã is zero: each sentence is composed alone (the
    baseline of the alignment)."""

    def __init__(self, config, input_size):
        super().__init__()
        dim, self.alignment = config.pair_encoder_dim, config.pair_alignment
        self.dropout = nn.Dropout(config.dropout)
        self.projection = nn.Linear(4 * input_size, dim)
        self.composition = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.hidden = nn.Linear(8 * dim, input_size)
        self.output_size = input_size

    def forward(self, a, a_mask, b, b_mask):
        if self.alignment:
            scores = a @ b.transpose(1, 2) / a.shape[-1] ** 0.5  # [B, words of a, words of b]
            a_aligned = masked_softmax(scores, b_mask.unsqueeze(1)) @ b
            b_aligned = masked_softmax(scores.transpose(1, 2), a_mask.unsqueeze(1)) @ a
        else:
            a_aligned, b_aligned = torch.zeros_like(a), torch.zeros_like(b)
        pooled = []
        for x, aligned, mask in ((a, a_aligned, a_mask), (b, b_aligned, b_mask)):
            enhanced = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)
            composed = run_bilstm(self.composition, F.relu(self.projection(self.dropout(enhanced))), mask)
            pooled += [masked_mean(composed, mask), masked_max(composed, mask)]
        return torch.tanh(self.hidden(self.dropout(torch.cat(pooled, dim=-1))))


class ElmoTaskHeadModel(ElmoPreTrainedModel):
    """Shared by the task heads, the ELMo recipe: biLM frozen unless `config.freeze_bilm` is False; trainable
    scalar mix and gamma with dropout (`config.dropout`, in ElmoModel); a task encoder; a linear classifier; an
    optional L2 penalty `config.mix_l2_lambda * sum(w ** 2)` on the mix weights, added to the training loss."""

    accepts_loss_kwargs = False  # mean loss per batch; Trainer divides it by the accumulation steps

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.elmo = ElmoModel(config)
        self.encoder = ElmoTaskEncoder(config)
        self.add_head_layers(config)
        self.post_init()
        self.apply_freezing()

    def add_head_layers(self, config):
        """The layers a head puts on the task encoder: here a linear classifier."""
        self.classifier = nn.Linear(self.encoder.output_size, config.num_labels)

    def frozen_modules(self):
        return [self.elmo.bilm] if self.config.freeze_bilm else []

    def encode(self, input_ids, attention_mask, **kwargs):
        """Task-encoded ELMo vectors [B, words, D], the word mask and the hidden states (with `output_hidden_states`,
        of the call or the config)."""
        output = self.elmo(
            input_ids,
            attention_mask=attention_mask,
            output_attentions=kwargs.get("output_attentions"),
            output_hidden_states=kwargs.get("output_hidden_states"),
            return_dict=True,
        )
        return self.encoder(output.last_hidden_state, output.mask), output.mask, output.hidden_states

    def mix_penalty(self):
        """The paper's `lambda * ||w||^2` on the (pre-softmax) mix weights: 0 means a uniform mix."""
        weights = [mix.scalar_parameters for mix in self.elmo.scalar_mixes if mix.fixed_parameters is None]
        if not self.training or self.config.mix_l2_lambda == 0 or not weights:
            return 0.0
        return self.config.mix_l2_lambda * sum((w**2).sum() for w in weights)


def check_pair_batch(input_ids, pair_input_ids):
    """Refuse second sentences that are not one for each first sentence (a text pair's two sides of one batch)."""
    if pair_input_ids.shape[0] != input_ids.shape[0]:
        raise ValueError(
            f"pair_input_ids holds {pair_input_ids.shape[0]} second sentences for {input_ids.shape[0]} first ones "
            "(input_ids): give one for each, as tokenizer(text, text_pair) does"
        )


def check_class_ids(labels, num_labels, shape, layout):
    """Refuse class labels that cross entropy would misread or fail on: an integer tensor of `shape` (`layout` names
    its axes; a trailing axis of 1 is accepted) holding ids in [0, num_labels) or -100 (ignored)."""
    if (
        not torch.is_tensor(labels)
        or labels.dtype.is_floating_point
        or labels.is_complex()
        or labels.dtype == torch.bool
    ):
        what = str(labels.dtype) if torch.is_tensor(labels) else type(labels).__name__
        raise TypeError(f"labels must be a tensor of integer class ids {layout}, got {what}")
    if tuple(labels.shape) not in (tuple(shape), (*shape, 1)):
        raise ValueError(f"labels must have shape {layout} = {list(shape)}, got {list(labels.shape)}")
    bad = labels[(labels != -100) & ((labels < 0) | (labels >= num_labels))]
    if bad.numel():
        raise ValueError(f"labels must be class ids in [0, {num_labels - 1}] or -100 (ignored), got {bad[:3].tolist()}")


class ElmoForTokenClassification(ElmoTaskHeadModel):
    """One label per word (ELMo has no sub-words): logits [batch, words, num_labels]; labels -100 are ignored."""

    @can_return_tuple
    def forward(self, input_ids, attention_mask=None, labels=None, **kwargs):
        r"""
        labels (`torch.LongTensor` of shape `(batch, words)`, *optional*): the label of each word, -100 to ignore.
        """
        vectors, mask, hidden_states = self.encode(input_ids, attention_mask, **kwargs)
        logits = self.classifier(vectors)
        loss = None
        if labels is not None:
            check_class_ids(labels, self.num_labels, mask.shape, "[batch, words]")
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten().long(), ignore_index=-100)
            loss = loss + self.mix_penalty()
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)


class ElmoForSequenceClassification(ElmoTaskHeadModel):
    """One label per sentence, or per text pair. The sentence vector is the masked mean over its words of the
    (task-encoded) ELMo vectors (`masked_mean`, TF-Hub ELMo's `default` pooling); an empty sentence gives zeros.
    A text pair (`pair_input_ids`, the tokenizer's second sentence) needs `config.pair_encoder_dim`: each sentence
    runs through the biLM and the task encoder on its own (ELMo's vectors are per sentence), then `ElmoPairEncoder`
    (ESIM's alignment, pooled) gives the pair's vector. `config.problem_type` as in transformers: regression
    (num_labels 1), single- or multi-label classification."""

    def add_head_layers(self, config):
        super().add_head_layers(config)
        self.pair_encoder = None
        if config.pair_encoder_dim is not None:
            self.pair_encoder = ElmoPairEncoder(config, self.encoder.output_size)

    @can_return_tuple
    def forward(
        self, input_ids, attention_mask=None, labels=None, pair_input_ids=None, pair_attention_mask=None, **kwargs
    ):
        r"""
        labels (`torch.LongTensor` of shape `(batch,)`, *optional*): class ids (floats for regression; `(batch,
            num_labels)` multi-hot floats for multi-label classification).
        pair_input_ids (`torch.LongTensor` of shape `(batch, words, chars)`, *optional*): the second sentence of each
            text pair (`tokenizer(text, text_pair)`); `hidden_states` are the first sentence's.
        pair_attention_mask (`torch.LongTensor` of shape `(batch, words)`, *optional*): its words.
        """
        vectors, mask, hidden_states = self.encode(input_ids, attention_mask, **kwargs)
        if pair_input_ids is None:
            if pair_attention_mask is not None:
                raise ValueError("pair_attention_mask was given without pair_input_ids (the second sentences)")
            logits = self.classifier(masked_mean(vectors, mask))
        else:
            if self.pair_encoder is None:
                raise ValueError(
                    "pair_input_ids given, but this head reads single sentences (it has no pair encoder): text "
                    "pairs need a head trained with one (pair_encoder_dim=128, the size of its ESIM-style pair "
                    "encoder; finetune sequence-classification --text-pair-column)"
                )
            check_pair_batch(input_ids, pair_input_ids)
            pair_vectors, pair_mask, _ = self.encode(pair_input_ids, pair_attention_mask, **kwargs)
            logits = self.classifier(self.pair_encoder(vectors, mask, pair_vectors, pair_mask))
        loss = None
        if labels is not None:
            if not torch.is_tensor(labels):
                raise TypeError(
                    f"labels must be a tensor (class ids, or floats for regression), got {type(labels).__name__}"
                )
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif not labels.dtype.is_floating_point and labels.dtype != torch.bool:
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            batch = (logits.shape[0],)
            if self.config.problem_type == "regression":
                if labels.is_complex() or labels.numel() != logits.shape[0]:
                    raise ValueError(f"regression labels must be a tensor of one number per text {list(batch)}")
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.float().view(-1))
            elif self.config.problem_type == "single_label_classification":
                check_class_ids(labels, self.num_labels, batch, "[batch]")
                loss = F.cross_entropy(logits.float(), labels.view(-1).long())
            else:
                if not (
                    labels.shape == logits.shape and not labels.is_complex() and ((labels >= 0) & (labels <= 1)).all()
                ):
                    raise ValueError(f"multi-label labels must be a tensor {list(logits.shape)} of values in [0, 1]")
                loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
            loss = loss + self.mix_penalty()
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)


class ElmoAttentionFlow(nn.Module):
    """BiDAF's attention flow layer (Seo et al., 2017, section 2.4), on the task-encoded ELMo vectors of a context
    `c` [B, T, D] and a question `q` [B, J, D]: the similarity `S[t, j] = w^T [c_t; q_j; c_t * q_j]`, context-to-query
    attention `ũ_t = sum_j softmax_j(S[t]) q_j`, query-to-context attention `h̃ = sum_t softmax_t(max_j S[t, j]) c_t`
    (one vector, the context words most like some question word), and the query-aware context
    `G = [c; ũ; c * ũ; c * h̃]` [B, T, 4D]."""

    def __init__(self, size):
        super().__init__()
        self.similarity = nn.Linear(3 * size, 1)
        self.output_size = 4 * size

    def forward(self, c, c_mask, q, q_mask):
        w_c, w_q, w_cq = self.similarity.weight[0].chunk(3)
        scores = (c @ w_c).unsqueeze(2) + (q @ w_q).unsqueeze(1) + (c * w_cq) @ q.transpose(1, 2)
        scores = scores + self.similarity.bias  # [B, T, J]
        attended_query = masked_softmax(scores, q_mask.unsqueeze(1)) @ q
        lowest = torch.finfo(scores.dtype).min
        if q.shape[1]:
            best = scores.masked_fill(~q_mask.unsqueeze(1), lowest).amax(dim=2)
        else:  # no question has a word: each context word's best is the lowest, as for an empty question in a batch
            best = scores.new_full(c.shape[:2], lowest)
        attended_context = (masked_softmax(best, c_mask).unsqueeze(1) @ c).expand_as(c)
        return torch.cat([c, attended_query, c * attended_query, c * attended_context], dim=-1)


class ElmoForQuestionAnswering(ElmoTaskHeadModel):
    """Extractive question answering, as `BertForQuestionAnswering` gives it but over words: start and end logits
    over the context's words. The question is `input_ids`, the context `pair_input_ids` (`tokenizer(question,
    context)`): each runs through the biLM and the task encoder on its own, then BiDAF kept small: the attention
    flow (`ElmoAttentionFlow`), a modeling BiLSTM of `config.task_encoder_dim` per direction, and the start and end
    projections of `[G; M]`. Positions past a context's words get the lowest logit."""

    def add_head_layers(self, config):
        self.attention_flow = ElmoAttentionFlow(self.encoder.output_size)
        self.modeling = nn.LSTM(
            self.attention_flow.output_size, config.task_encoder_dim, batch_first=True, bidirectional=True
        )
        self.dropout = nn.Dropout(config.dropout)
        self.span_outputs = nn.Linear(self.attention_flow.output_size + 2 * config.task_encoder_dim, 2)

    @can_return_tuple
    def forward(
        self,
        input_ids,
        attention_mask=None,
        pair_input_ids=None,
        pair_attention_mask=None,
        start_positions=None,
        end_positions=None,
        **kwargs,
    ):
        r"""
        input_ids (`torch.LongTensor` of shape `(batch, words, chars)`): the questions.
        pair_input_ids (`torch.LongTensor` of shape `(batch, context words, chars)`): the contexts.
        pair_attention_mask (`torch.LongTensor` of shape `(batch, context words)`, *optional*): their words.
        start_positions, end_positions (`torch.LongTensor` of shape `(batch,)`, *optional*): the answer's first and
            last word in the context; a position outside the context's words (an answer cut off by truncation) is
            ignored, as `BertForQuestionAnswering` ignores positions past its sequence. The loss is the mean of the
            two cross entropies (each the mean over the positions kept: 0 where a batch keeps none).
        """
        if pair_input_ids is None:
            raise ValueError(
                "ElmoForQuestionAnswering needs the context as pair_input_ids (tokenizer(question, context) gives it)"
            )
        check_pair_batch(input_ids, pair_input_ids)
        if (start_positions is None) != (end_positions is None):
            raise ValueError(
                "start_positions and end_positions go together (the loss needs both): give both or neither"
            )
        question, question_mask, _ = self.encode(input_ids, attention_mask, **kwargs)
        context, context_mask, hidden_states = self.encode(pair_input_ids, pair_attention_mask, **kwargs)
        flow = self.attention_flow(context, context_mask, question, question_mask)
        modeled = run_bilstm(self.modeling, self.dropout(flow), context_mask)
        logits = self.span_outputs(self.dropout(torch.cat([flow, modeled], dim=-1)))
        logits = logits.masked_fill(~context_mask.unsqueeze(-1), torch.finfo(logits.dtype).min)
        start_logits, end_logits = (x.squeeze(-1).contiguous() for x in logits.split(1, dim=-1))
        loss = None
        if start_positions is not None:
            ignored, lengths = start_logits.shape[1], context_mask.sum(dim=1)
            losses = []
            for positions, position_logits in ((start_positions, start_logits), (end_positions, end_logits)):
                if not torch.is_tensor(positions) or positions.dtype.is_floating_point or positions.is_complex():
                    raise TypeError("start_positions and end_positions must be tensors of integer word positions")
                positions = positions.view(-1)
                positions = torch.where((positions >= 0) & (positions < lengths), positions, ignored)
                kept = (positions != ignored).sum().clamp(min=1)  # (none kept: 0, where the mean would be NaN)
                nll = F.cross_entropy(position_logits.float(), positions.long(), ignore_index=ignored, reduction="sum")
                losses.append(nll / kept)
            loss = (losses[0] + losses[1]) / 2 + self.mix_penalty()
        return QuestionAnsweringModelOutput(
            loss=loss, start_logits=start_logits, end_logits=end_logits, hidden_states=hidden_states
        )


for _auto_class, _reference in ELMO_AUTO_MAP.items():  # the one list of which class each Auto class loads
    if _auto_class != "AutoConfig":
        globals()[_reference.rsplit(".", 1)[1]].register_for_auto_class(_auto_class)

__all__ = [
    "ElmoForLanguageModeling",
    "ElmoForQuestionAnswering",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoModel",
    "ElmoPreTrainedModel",
    "lm_perplexities",
    "log_uniform_candidates",
    "masked_mean",
]
