"""transformers pipelines for ELMo's character input: feature extraction, text and token classification, fill-mask,
extractive question answering.

The stock pipelines batch by padding `input_ids` with `pad_token_id`, a word id (32768 for the shipped model),
while ELMo's `input_ids` are [words, 50] char ids padded with all-zero rows; token classification also reads one id
per token. These subclasses change only that:

- between `preprocess` and `_forward` the char ids travel as `char_ids`, a key the stock collate pads with 0;
- token classification works on whole words (ELMo has no sub-words): one prediction per whitespace-separated word,
  with `start`/`end` character offsets into the input string; `index` is the word's position.
- fill-mask ranks words of the LM's vocabulary by both directions of the biLM (LAMA's rule, see `ElmoFillMaskPipeline`).
- question answering (`ElmoQuestionAnsweringPipeline`) answers with a span of the context's words, its text and its
  character offsets, the context windowed in words (transformers 5 has no question-answering pipeline of its own:
  the task is this one, through `custom_pipelines`).

Saved configs list these classes in `custom_pipelines` (`configuration_elmo.ELMO_PIPELINES`), so
`pipeline(task, model=folder, trust_remote_code=True)` uses them. Without remote code (installed package) pass
`pipeline_class=` instead.
"""

import filecmp
import importlib.util
import os
import sys

import numpy as np
import torch
from transformers.pipelines import (
    FeatureExtractionPipeline,
    FillMaskPipeline,
    TextClassificationPipeline,
    TokenClassificationPipeline,
)
from transformers.pipelines.base import ChunkPipeline
from transformers.pipelines.token_classification import AggregationStrategy


def code_source(obj):
    """Where the class of `obj` comes from: a model folder's files (remote code) or the installed package."""
    remote = type(obj).__module__.startswith("transformers_modules.")
    return "the model folder's files (trust_remote_code)" if remote else "the installed package"


def differs_from_installed(obj):
    """Whether the class of `obj` is the folder's copy of the code (remote code) and one of that folder's ELMo modules
    differs from the installed module of its name (a folder saved by another version)."""
    if not type(obj).__module__.startswith("transformers_modules."):
        return False
    folder = os.path.dirname(sys.modules[type(obj).__module__].__file__)
    for name in os.listdir(folder):
        spec = importlib.util.find_spec(name[:-3]) if name.endswith("_elmo.py") else None
        if spec is not None and spec.origin and not filecmp.cmp(os.path.join(folder, name), spec.origin, shallow=False):
            return True
    return False


class ElmoCharIdsMixin:
    """Tokenize to char ids under the key `char_ids` (padded with 0 by the stock collate) and back for the model.

    After `elmo_transformers.register()`, `trust_remote_code=True` takes the model from the installed package
    (transformers prefers a registered class) but the pipeline and tokenizer from the folder's files. Where those
    files are the installed code, byte for byte, that is one copy of the code and runs; where they differ (a folder
    saved by another version), the mix is refused, naming the two ways to load."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        parts = (("pipeline", self), ("model", self.model), ("tokenizer", self.tokenizer))
        sources = {name: code_source(obj) for name, obj in parts}
        if len(set(sources.values())) > 1 and any(differs_from_installed(obj) for _, obj in parts):
            mixed = ", ".join(f"the {name} from {source}" for name, source in sources.items())
            raise ValueError(
                f"this ELMo pipeline would mix two versions of the code ({mixed}; the folder's files differ from the "
                "installed package's): after `elmo_transformers.register()` leave out trust_remote_code and pass "
                f"pipeline_class=elmo_transformers.{type(self).__name__}, or save the folder again with the installed "
                "version"
            )

    def _char_inputs(self, text, **tokenizer_kwargs):
        encoding = self.tokenizer(text, return_tensors="pt", **tokenizer_kwargs)
        return {"char_ids": encoding["input_ids"], "attention_mask": encoding["attention_mask"]}

    @staticmethod
    def _model_inputs(model_inputs):
        return {"input_ids": model_inputs.pop("char_ids"), "attention_mask": model_inputs.pop("attention_mask")}


class ElmoFeatureExtractionPipeline(ElmoCharIdsMixin, FeatureExtractionPipeline):
    """One ELMo vector per word: `[1, words, 2 * projection_dim]` per text (nested lists, or a tensor with
    `return_tensors=True`), the model's `last_hidden_state` without the batch's padding."""

    def preprocess(self, inputs, **tokenize_kwargs):
        return self._char_inputs(inputs, **tokenize_kwargs)

    def _forward(self, model_inputs):
        output = self.model(**self._model_inputs(model_inputs))
        return {"last_hidden_state": output.last_hidden_state, "mask": output.mask}

    def postprocess(self, model_outputs, return_tensors=False):
        vectors = model_outputs["last_hidden_state"][:, : int(model_outputs["mask"].sum())]
        return vectors if return_tensors else vectors.tolist()


class ElmoTextClassificationPipeline(ElmoCharIdsMixin, TextClassificationPipeline):
    """The stock text classification on char ids: a text, or a text pair `{"text": ..., "text_pair": ...}` (the
    second sentence travels as `pair_char_ids`, for a head with a pair encoder), or a list of them; the stock
    `classifier(text, text_pair=...)` is the pair too."""

    def preprocess(self, inputs, **tokenizer_kwargs):
        if "text_pair" in tokenizer_kwargs:  # (the stock pipeline passes it on to the tokenizer: a pair)
            inputs = {"text": inputs, "text_pair": tokenizer_kwargs.pop("text_pair")}
        if isinstance(inputs, dict):
            if set(inputs) != {"text", "text_pair"} or not all(isinstance(v, str) for v in inputs.values()):
                raise ValueError(
                    'ELMo text classification takes a text pair as {"text": str, "text_pair": str}, '
                    f"got the keys {sorted(inputs)}"
                )
            encoding = self.tokenizer(inputs["text"], inputs["text_pair"], return_tensors="pt", **tokenizer_kwargs)
            return {
                "char_ids": encoding["input_ids"],
                "attention_mask": encoding["attention_mask"],
                "pair_char_ids": encoding["pair_input_ids"],
                "pair_attention_mask": encoding["pair_attention_mask"],
            }
        if not isinstance(inputs, str):
            raise ValueError(
                'ELMo text classification takes a text (str) or a text pair {"text": ..., "text_pair": '
                f"...}}, got {type(inputs).__name__}"
            )
        return self._char_inputs(inputs, **tokenizer_kwargs)

    def _forward(self, model_inputs):
        pair = {}
        if "pair_char_ids" in model_inputs:
            pair = {
                "pair_input_ids": model_inputs.pop("pair_char_ids"),
                "pair_attention_mask": model_inputs.pop("pair_attention_mask"),
            }
        return self.model(**self._model_inputs(model_inputs), **pair)


class ElmoTokenClassificationPipeline(ElmoCharIdsMixin, TokenClassificationPipeline):
    """Word-level token classification: an entity per word (`aggregation_strategy="none"`), or groups of adjacent
    words with the same entity (`"simple"`, and `"first"`/`"average"`/`"max"`, which are the same thing here since
    every word is one token). `word` is always the input's text between `start` and `end`."""

    def _sanitize_parameters(
        self,
        ignore_labels=None,
        aggregation_strategy=None,
        offset_mapping=None,
        is_split_into_words=False,
        stride=None,
        delimiter=None,
    ):
        if offset_mapping is not None or stride is not None:
            raise ValueError("ELMo token classification takes neither offset_mapping nor stride: it reads whole words")
        preprocess_params, forward_params, postprocess_params = super()._sanitize_parameters(
            ignore_labels=ignore_labels, is_split_into_words=is_split_into_words, delimiter=delimiter
        )
        if aggregation_strategy is not None:  # the stock check refuses "first" etc. for tokenizers without sub-words
            if isinstance(aggregation_strategy, str):
                aggregation_strategy = AggregationStrategy[aggregation_strategy.upper()]
            postprocess_params["aggregation_strategy"] = aggregation_strategy
        return preprocess_params, forward_params, postprocess_params

    def preprocess(self, sentence, is_split_into_words=False, delimiter=" "):
        if is_split_into_words:
            words, spans, start = list(sentence), [], 0
            for word in words:
                spans.append((start, start + len(word)))
                start += len(word) + len(delimiter)
            sentence = delimiter.join(words)
        else:
            if not isinstance(sentence, str):
                raise ValueError(
                    f"token classification takes a str (or words with is_split_into_words=True), got {type(sentence)}"
                )
            words, spans = self.tokenizer.segment(sentence)
        yield {
            **self._char_inputs(words, is_split_into_words=True),
            "sentence": sentence,
            "spans": spans,
            "is_last": True,
        }

    def _forward(self, model_inputs):
        logits = self.model(**self._model_inputs(model_inputs)).logits
        return {"logits": logits, **model_inputs}

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.NONE, ignore_labels=None):
        ignore_labels = ["O"] if ignore_labels is None else ignore_labels
        (output,) = all_outputs  # one chunk per text
        sentence, spans = output["sentence"], output["spans"]
        logits = output["logits"][0, : len(spans)].float().numpy()
        scores = np.exp(logits - logits.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        pre_entities = [
            {
                "word": sentence[start:end],
                "scores": word_scores,
                "start": start,
                "end": end,
                "index": i,
                "is_subword": False,
            }
            for i, ((start, end), word_scores) in enumerate(zip(spans, scores))
        ]
        entities = self.aggregate(pre_entities, aggregation_strategy)
        for entity in entities:
            entity["word"] = sentence[entity["start"] : entity["end"]]
        return [e for e in entities if e.get("entity", e.get("entity_group")) not in ignore_labels]


class ElmoFillMaskPipeline(ElmoCharIdsMixin, FillMaskPipeline):
    """Words of the language model's vocabulary for the one `mask_token` (`<mask>`, a word of its own) in each text,
    for `ElmoForLanguageModeling` folders.

    LAMA's rule for ELMo: each word w is ranked by the mean of the forward LM's log P(w | left context) and the
    backward LM's log P(w | right context) at the mask; `score` is exp of that mean normalised over the whole
    vocabulary (so the scores of all words sum to 1). `<S>`, `</S>` and `<UNK>` are never returned. `targets` (a
    word or a list) restricts the candidates to those vocabulary words; `top_k` (default 5) caps the list. `sequence`
    is the input text with the mask replaced by the word; `token` is the word id, `token_str` the word.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model.check_vocabulary(self.tokenizer)

    def _sanitize_parameters(self, top_k=None, targets=None, tokenizer_kwargs=None):
        if tokenizer_kwargs:
            raise ValueError("ELMo fill-mask takes no tokenizer_kwargs: texts are split on white space")
        postprocess_params = {}
        if targets is not None:
            postprocess_params["target_ids"] = self.get_target_ids(targets)
        if top_k is not None:
            if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
                raise ValueError(f"top_k must be a positive int, got {top_k!r}")
            postprocess_params["top_k"] = top_k
        return {}, {}, postprocess_params

    def get_target_ids(self, targets):
        """Vocabulary ids of `targets`, refusing words the softmax does not have and the special words."""
        targets = [targets] if isinstance(targets, str) else list(targets)
        vocab = self.tokenizer.vocab  # the softmax's words (get_vocab() adds the added tokens, <pad> and <mask>)
        excluded = {self.tokenizer.bos_token, self.tokenizer.eos_token, self.tokenizer.unk_token}
        unknown = [t for t in targets if t not in vocab or t in excluded]
        if unknown or not targets:
            raise ValueError(
                f"targets must be words of the model's vocabulary other than <S>, </S>, <UNK>; "
                f"not: {unknown or targets}"
            )
        return torch.tensor([vocab[t] for t in dict.fromkeys(targets)])

    def preprocess(self, inputs):
        if not isinstance(inputs, str):
            raise ValueError(f"ELMo fill-mask takes texts (str), got {type(inputs).__name__}")
        mask = self.tokenizer.mask_token
        words, spans = self.tokenizer.segment(inputs)
        masks = [i for i, word in enumerate(words) if word == mask]
        if len(masks) != 1:
            raise ValueError(
                f"ELMo fill-mask needs exactly one {mask} per text, as a word of its own (white space "
                f"around it); found {len(masks)} in {inputs!r}"
            )
        return {
            **self._char_inputs(words, is_split_into_words=True),
            "position": torch.tensor(masks),
            "text": inputs,
            "span": spans[masks[0]],
        }

    def _forward(self, model_inputs):
        position = model_inputs.pop("position")
        log_scores = self.model.masked_word_scores(**self._model_inputs(model_inputs), positions=position)
        return {"log_scores": log_scores, "text": model_inputs["text"], "span": model_inputs["span"]}

    def postprocess(self, model_outputs, top_k=5, target_ids=None):
        specials = [
            self.tokenizer.convert_tokens_to_ids(t)
            for t in (self.tokenizer.bos_token, self.tokenizer.eos_token, self.tokenizer.unk_token)
        ]
        best = self.model.best_words(model_outputs["log_scores"][0], top_k, specials, target_ids)
        text, (start, end) = model_outputs["text"], model_outputs["span"]
        result = []
        for word_id, score in best:
            word = self.tokenizer.convert_ids_to_tokens(word_id)
            result.append(
                {"score": score, "token": word_id, "token_str": word, "sequence": text[:start] + word + text[end:]}
            )
        return result


class ElmoQuestionAnsweringPipeline(ElmoCharIdsMixin, ChunkPipeline):
    """Extractive question answering for `ElmoForQuestionAnswering` folders, with the arguments and answers of
    transformers' QuestionAnsweringPipeline (transformers 4): `qa(question=..., context=...)`, a dict
    `{"question", "context"}` or a list of them; each answer is `{"score", "start", "end", "answer"}`, `start` and
    `end` character offsets into the context and `answer` the context's text between them (the best `top_k`, one
    dict when `top_k` is 1).

    ELMo reads words, so the lengths are in words: `max_answer_len` (default 15) caps an answer, `max_question_len`
    (64) keeps a question's first words, and a context longer than `max_seq_len` words (384) is read in windows of
    `max_seq_len` words, each starting `doc_stride` words (128) before the previous one ends, so that every word is
    in a window and an answer of up to `doc_stride` words is whole in one. A span's score is
    `p_start(first word) * p_end(last word)` within its window (softmax over the window's words), a span found in two
    windows keeping its best. `handle_impossible_answer=True` adds the empty answer (`""`, start and end 0), scored
    as the probability mass left outside every allowed span of a window (the least over the windows); a context
    with no words gives only that answer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.check_model_type({"elmo": "ElmoForQuestionAnswering"})

    def _sanitize_parameters(
        self,
        top_k=None,
        doc_stride=None,
        max_answer_len=None,
        max_seq_len=None,
        max_question_len=None,
        handle_impossible_answer=None,
    ):
        for name, value, unit in (
            ("top_k", top_k, "answers"),
            ("doc_stride", doc_stride, "words"),
            ("max_answer_len", max_answer_len, "words"),
            ("max_seq_len", max_seq_len, "words"),
            ("max_question_len", max_question_len, "words"),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < (name != "doc_stride")
            ):
                raise ValueError(
                    f"{name} must be an int of at least {int(name != 'doc_stride')} ({unit}), got {value!r}"
                )
        if handle_impossible_answer is not None and not isinstance(handle_impossible_answer, bool):
            raise ValueError(f"handle_impossible_answer must be True or False, got {handle_impossible_answer!r:.50}")
        preprocess = {
            k: v
            for k, v in (
                ("doc_stride", doc_stride),
                ("max_seq_len", max_seq_len),
                ("max_question_len", max_question_len),
            )
            if v is not None
        }
        postprocess = {
            k: v
            for k, v in (
                ("top_k", top_k),
                ("max_answer_len", max_answer_len),
                ("handle_impossible_answer", handle_impossible_answer),
            )
            if v is not None
        }
        return preprocess, {}, postprocess

    def __call__(self, *args, **kwargs):
        """`qa(question=..., context=...)` (strs, or lists of the same length), `qa({"question": ..., "context":
        ...})` or `qa([dict, ...])`; a list of one example answers as that example alone, as transformers 4 did, and
        an empty list with none ([])."""
        if not args and "question" in kwargs and "context" in kwargs:
            question, context = kwargs.pop("question"), kwargs.pop("context")
            if isinstance(question, str) != isinstance(context, str) or (
                not isinstance(question, str) and len(question) != len(context)
            ):
                raise ValueError("question and context must be two strs or two lists of the same length")
            inputs = (
                {"question": question, "context": context}
                if isinstance(question, str)
                else [{"question": q, "context": c} for q, c in zip(question, context)]
            )
        elif len(args) == 1:
            inputs = args[0]
        else:
            raise ValueError(
                'question answering takes question=..., context=..., or {"question": ..., "context": '
                "...} (or a list of them)"
            )
        if isinstance(inputs, (list, tuple)) and len(inputs) <= 1:
            return super().__call__(inputs[0], **kwargs) if inputs else []  # (no example: no answer)
        return super().__call__(inputs, **kwargs)

    def preprocess(self, example, max_seq_len=384, doc_stride=128, max_question_len=64):
        if not (
            isinstance(example, dict)
            and set(example) == {"question", "context"}
            and all(isinstance(v, str) for v in example.values())
        ):
            raise ValueError(f'question answering takes {{"question": str, "context": str}}, got {example!r:.100}')
        if doc_stride >= max_seq_len:
            raise ValueError(
                f"doc_stride ({doc_stride}) must be less than max_seq_len ({max_seq_len}): the words two "
                "windows of the context share"
            )
        question = self.tokenizer.tokenize(example["question"])[:max_question_len]
        words, spans = self.tokenizer.segment(example["context"])
        starts = list(range(0, max(len(words) - doc_stride, 1), max_seq_len - doc_stride))
        for i, start in enumerate(starts):
            window = words[start : start + max_seq_len]
            encoding = self.tokenizer([question], [window], is_split_into_words=True, return_tensors="pt")
            yield {
                "char_ids": encoding["input_ids"],
                "attention_mask": encoding["attention_mask"],
                "pair_char_ids": encoding["pair_input_ids"],
                "pair_attention_mask": encoding["pair_attention_mask"],
                "offset": start,
                "spans": spans,
                "context": example["context"],
                "is_last": i == len(starts) - 1,
            }

    def _forward(self, model_inputs):
        inputs = self._model_inputs(model_inputs)
        output = self.model(
            **inputs,
            pair_input_ids=model_inputs.pop("pair_char_ids"),
            pair_attention_mask=model_inputs["pair_attention_mask"],
        )
        return {"start_logits": output.start_logits, "end_logits": output.end_logits, **model_inputs}

    def postprocess(self, all_outputs, top_k=1, max_answer_len=15, handle_impossible_answer=False):
        best, null_score = {}, 1.0
        for output in all_outputs:
            n = int(output["pair_attention_mask"][0].sum())
            if n == 0:
                continue
            p_start = torch.softmax(output["start_logits"][0, :n].float(), dim=0)
            p_end = torch.softmax(output["end_logits"][0, :n].float(), dim=0)
            allowed = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer_len - 1)
            scores = torch.where(allowed, p_start[:, None] * p_end[None, :], 0.0)
            null_score = min(null_score, float(1 - scores.sum().clamp(max=1)))
            top = scores.flatten().topk(min(top_k, int(allowed.sum())))
            for score, index in zip(top.values.tolist(), top.indices.tolist()):
                first, last = output["offset"] + index // n, output["offset"] + index % n
                best[first, last] = max(score, best.get((first, last), 0.0))
        spans, context = all_outputs[0]["spans"], all_outputs[0]["context"]
        answers = [
            {
                "score": score,
                "start": spans[first][0],
                "end": spans[last][1],
                "answer": context[spans[first][0] : spans[last][1]],
            }
            for (first, last), score in best.items()
        ]
        if handle_impossible_answer or not answers:
            answers.append({"score": null_score, "start": 0, "end": 0, "answer": ""})
        answers = sorted(answers, key=lambda a: -a["score"])[:top_k]
        return answers[0] if top_k == 1 else answers
