"""Pre-training the biLM language model (`elmo-transformers pretrain`): from scratch, or continuing a model on new
text, whose softmax then grows by the text's frequent out-of-vocabulary words (`add_words`)."""

import collections
import logging
import math
import os

import torch
from torch import nn

from configuration_elmo import ElmoConfig
from modeling_elmo import ElmoForLanguageModeling, ElmoModel, lm_perplexities
from tokenization_elmo import ElmoTokenizer

from ..errors import DataError, first_line
from ..model_folder import loading, open_model
from ..model_source import load_model
from .data import (
    SPECIAL_WORDS,
    DataCollatorForElmoLanguageModeling,
    build_vocabulary,
    load_splits,
    text_to_windows,
    write_words,
)
from .runner import json_argument, limit_samples, model_options, run, settle_resume_point

logger = logging.getLogger(__name__)


def frequent_new_words(windows, vocab, max_words, min_count):
    """The words of `windows` ("words" column) missing from `vocab`, seen at least `min_count` times, most frequent
    first (ties alphabetical), at most `max_words` (`SPECIAL_WORDS` never); with their counts, and the count of all
    missing-word tokens."""
    counts = collections.Counter()
    for batch in windows.iter(batch_size=10_000):
        for words in batch["words"]:
            counts.update(w for w in words if w not in vocab)
    for special in SPECIAL_WORDS:
        counts.pop(special, None)
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))[:max_words]
    return [(w, counts[w]) for w in ranked], sum(counts.values())


@torch.no_grad()
def add_words_to_softmax(model, unk_id, new_words, unseen_total):
    """Append one softmax row per new word to `model.lm_softmax` (word ids follow the existing ones).

    Before, every occurrence of these words was predicted as `<UNK>`. Each new row starts as `<UNK>`'s row with the
    bias lowered by log(word count / count of all out-of-vocabulary tokens), so each word starts with its share of
    `<UNK>`'s probability, and training refines it from there.
    """
    old = model.lm_softmax
    counts = torch.tensor([c for _, c in new_words], dtype=torch.float32)
    weight = old.weight[unk_id].expand(len(new_words), -1)
    bias = old.bias[unk_id] + torch.log(counts / max(unseen_total, 1)).to(old.bias.dtype)
    grown = nn.Linear(
        old.in_features, old.out_features + len(new_words), device=old.weight.device, dtype=old.weight.dtype
    )
    grown.weight.copy_(torch.cat([old.weight, weight]))
    grown.bias.copy_(torch.cat([old.bias, bias]))
    model.lm_softmax = grown
    model.config.lm_vocab_size = grown.out_features
    return model


def load_windows(data_args, training_args, split_words=None):
    """Train and evaluation splits as rows of word windows, lines split into words by `split_words` (the starting
    model's tokenizer's: its segmenter; None: white space)."""
    data_files = {}
    if data_args.train_file:
        data_files["train"] = data_args.train_file
    if data_args.validation_file:
        data_files["validation"] = data_args.validation_file
    raw = load_splits(data_args.dataset_name, data_args.dataset_config_name, data_files)
    if "validation" not in raw and "train" in raw and data_args.validation_split_percentage > 0:
        lines, share = len(raw["train"]), data_args.validation_split_percentage / 100
        if not 0 < share < 1 or lines - math.ceil(lines * share) < 1:  # datasets holds out ceil(share x lines)
            percentage = data_args.validation_split_percentage
            raise DataError(
                f"validation_split_percentage {percentage}: cannot hold out {percentage}% of {lines:,} "
                "training lines for validation (each part needs a line): give 0 to hold out none, or a "
                "validation file",
                percentage,
                argument="validation_split_percentage",
            )
        held_out = raw["train"].train_test_split(
            test_size=data_args.validation_split_percentage / 100, seed=training_args.seed
        )
        raw["train"], raw["validation"] = held_out["train"], held_out["test"]
    limit_samples(raw, data_args.max_train_samples, data_args.max_eval_samples)
    with training_args.main_process_first(desc="windows"):
        return {
            split: text_to_windows(
                raw[split],
                data_args.text_column,
                data_args.max_words,
                data_args.preprocessing_num_workers,
                split_words=split_words,
            )
            for split in ("train", "validation")
            if split in raw
        }


def vocab_file_tokenizer(data_args):
    """The tokenizer of `vocab_file`; a file that is not a bilm-tf vocabulary is one line naming the argument."""
    try:
        return ElmoTokenizer(vocab_file=data_args.vocab_file)
    except (OSError, ValueError) as e:
        raise DataError(
            f"vocab_file {data_args.vocab_file}: {first_line(e)}", data_args.vocab_file, argument="vocab_file"
        ) from None


def load_tokenizer(model_args, data_args, training_args, train_windows, start, start_tokenizer, resumed):
    """The word vocabulary and whether it is the starting model's own (then its softmax is kept too): a resumed
    checkpoint's (`resumed`, its ModelFolder: its softmax rows follow that word order), else `vocab_file`, else the
    starting model's (`start`, its ModelFolder, and `start_tokenizer`, if it has an LM softmax of that size), else
    built from the text."""
    checkpoint = training_args.resume_from_checkpoint
    if resumed is not None:
        tokenizer = resumed.tokenizer()
        if data_args.vocab_file and vocab_file_tokenizer(data_args).get_vocab() != tokenizer.get_vocab():
            raise DataError(
                f"vocab_file {data_args.vocab_file} differs from the vocabulary of the checkpoint "
                f"{checkpoint}: its softmax rows follow the checkpoint's words (resume without it)",
                data_args.vocab_file,
                argument="vocab_file",
            )
        logger.info(
            f"Resuming: the vocabulary ({tokenizer.vocab_size} words) is the checkpoint's; vocab_size and "
            "min_count apply only when a vocabulary is built"
        )
        return tokenizer, False
    if data_args.vocab_file:
        return vocab_file_tokenizer(data_args), False
    if start is not None:
        tokenizer = start_tokenizer
        lm_vocab_size = start.config.get("lm_vocab_size") if start.is_language_model else None
        if lm_vocab_size is not None and lm_vocab_size == tokenizer.vocab_size:
            logger.info(f"Reusing the vocabulary ({tokenizer.vocab_size} words) and softmax of the starting model")
            return tokenizer, True
        if model_args.add_words and not checkpoint:  # refused before a vocabulary is built and written
            raise DataError(
                f"add_words extends the starting model's own softmax, but the vocab.txt of "
                f"{model_args.model_name_or_path} has {tokenizer.vocab_size:,} words and its softmax "
                f"{lm_vocab_size or 0:,}: restore its vocab.txt",
                argument="add_words",
            )
    if train_windows is None:
        raise DataError(
            "vocab_file not given, and no training data to build a vocabulary from: give one of them",
            argument="vocab_file",
        )

    def build(path):
        size = build_vocabulary(train_windows, path, data_args.vocab_size, data_args.min_count)
        logger.info(f"Built a vocabulary of {size} words into {path}")

    return ElmoTokenizer(vocab_file=write_run_vocabulary(training_args, build)), False


# bilm-tf's negatives per batch, for a starting LM that has no sampled-softmax setting (a converted one).
BILM_TF_NEGATIVE_SAMPLES = 8192


def build_language_model(model_args, vocab_size, keep_softmax, start):
    """The language model to train: from scratch (size arguments), or the starting model's (`start`, its
    ModelFolder) biLM with its softmax (same vocabulary) or a new one."""
    lm_fields = {
        "lm_vocab_size": vocab_size,
        "lm_n_negative_samples": model_args.n_negative_samples,
        "lm_dropout": model_args.lm_dropout,
    }
    if start is not None and model_args.n_negative_samples is None:
        if start.is_language_model:  # continuing a language model: its sampled softmax, or bilm-tf's
            negatives = start.config.get("lm_n_negative_samples")
            lm_fields["lm_n_negative_samples"] = negatives or BILM_TF_NEGATIVE_SAMPLES
    if start is not None and keep_softmax:
        return load_model(start, ElmoForLanguageModeling, config=lm_fields)[0]
    if start is not None:
        bilm = load_model(start, ElmoModel)[0]
        for name, value in lm_fields.items():
            setattr(bilm.config, name, value)
        bilm.config.validate()
        model = ElmoForLanguageModeling(bilm.config)
        model.elmo.load_state_dict(bilm.state_dict())
        return model
    config = ElmoConfig(
        char_embedding_dim=model_args.char_embedding_dim,
        filters=json_argument(model_args.filters, "filters", "'[[1, 32], [2, 32]]'"),
        n_highway=model_args.n_highway,
        lstm_dim=model_args.lstm_dim,
        projection_dim=model_args.projection_dim,
        n_layers=model_args.n_layers,
        **lm_fields,
    )
    return ElmoForLanguageModeling(config)


def add_new_words(model, tokenizer, model_args, training_args, train_windows):
    """`add_words`: the text's frequent out-of-vocabulary words join the vocabulary (written to the output folder's
    vocab.txt, after the starting model's words) and the softmax. Returns the tokenizer to train with."""
    new_words, unseen_total = frequent_new_words(
        train_windows, tokenizer.vocab, model_args.add_words, model_args.add_words_min_count
    )
    if not new_words:
        logger.info("add_words: no out-of-vocabulary word is frequent enough; the vocabulary is unchanged")
        return tokenizer
    words = [*tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size)), *(w for w, _ in new_words)]
    path = write_run_vocabulary(training_args, lambda path: write_words(path, words))
    add_words_to_softmax(model, tokenizer.unk_token_id, new_words, unseen_total)
    logger.info(
        f"add_words: {len(new_words)} words added (e.g. {[w for w, _ in new_words[:10]]}), "
        f"vocabulary {model.config.lm_vocab_size:,} words"
    )
    return ElmoTokenizer(vocab_file=path, max_characters_per_token=tokenizer.max_characters_per_token)


def compute_metrics(eval_prediction):
    """Exact corpus perplexities from the per-sentence NLL sums the model returns (not an average of batches)."""
    forward_nll, backward_nll, num_predictions = eval_prediction.predictions[:3]
    return lm_perplexities(forward_nll, backward_nll, num_predictions)


def write_run_vocabulary(training_args, write):
    """OUTPUT_DIR/vocab.txt, the run's vocabulary: `write(path)` runs on the main process only, before the other
    processes go on to read it."""
    os.makedirs(training_args.output_dir, exist_ok=True)
    path = os.path.join(training_args.output_dir, "vocab.txt")
    with training_args.main_process_first(desc="vocabulary"):
        if training_args.process_index == 0:
            write(path)
    return path


def pretrain(model_args, data_args, training_args):
    """Pre-train (`pretrain`) from scratch or from a model folder (`model_args.model_name_or_path`; `model_args.model`
    where it is open already), into `training_args.output_dir` (the command has checked that it is
    apart from the inputs and empty, or to be written into): every check first, then data, vocabulary, model and the
    Trainer run. Returns the Trainer."""
    if data_args.max_words < 1:
        raise DataError(
            f"max_words {data_args.max_words}: must be at least 1 (the words of a training window)",
            data_args.max_words,
            argument="max_words",
        )
    if model_args.add_words < 0:
        raise DataError(
            f"add_words {model_args.add_words}: must be 0 (none) or more", model_args.add_words, argument="add_words"
        )
    if model_args.add_words_min_count < 1:
        raise DataError(
            f"add_words_min_count {model_args.add_words_min_count}: must be at least 1",
            model_args.add_words_min_count,
            argument="add_words_min_count",
        )
    settle_resume_point(training_args)
    start = model_args.model
    if start is None and model_args.model_name_or_path:
        start = open_model(model_args.model_name_or_path)
    if start is not None:  # a config.json value ElmoConfig refuses: one line, before the data is read
        with loading(start.name):
            start.elmo_config()
    if model_args.add_words and not training_args.resume_from_checkpoint:  # before anything is written
        if start is None or not start.is_language_model or not training_args.do_train or data_args.vocab_file:
            raise DataError(
                "add_words extends the starting model's own softmax: it needs a language model (with its "
                "vocab.txt) to start from, training, and no other vocabulary file",
                argument="add_words",
            )
    # The collator reads the "words" column, which is not a forward() argument.
    training_args.remove_unused_columns = False
    if data_args.dataset_name is None and not (data_args.train_file or data_args.validation_file):
        raise DataError("no data: give train_file / validation_file or dataset_name")
    if training_args.do_train and data_args.dataset_name is None and not data_args.train_file:
        raise DataError("do_train needs training data: give train_file or dataset_name")

    start_tokenizer = None
    if start is not None:
        with loading(start.name):
            start_tokenizer = start.tokenizer()
    windows = load_windows(data_args, training_args, start_tokenizer.split_words if start_tokenizer else None)
    checkpoint = training_args.resume_from_checkpoint
    resumed = None  # a checkpoint with its vocabulary: what the run goes on with
    if checkpoint and os.path.isfile(os.path.join(checkpoint, "vocab.txt")):
        resumed = open_model(checkpoint, local=True)
    tokenizer, keep_softmax = load_tokenizer(
        model_args, data_args, training_args, windows.get("train"), start, start_tokenizer, resumed
    )
    with model_options(model_args):
        model = build_language_model(model_args, tokenizer.vocab_size, keep_softmax, start)
    if model_args.add_words and training_args.resume_from_checkpoint:
        logger.info("add_words: resuming, the vocabulary and softmax are the checkpoint's (with the words added then)")
    elif model_args.add_words:
        tokenizer = add_new_words(model, tokenizer, model_args, training_args, windows["train"])
    logger.info(f"Vocabulary: {tokenizer.vocab_size:,} words")
    return run(
        model,
        tokenizer,
        training_args,
        windows,
        DataCollatorForElmoLanguageModeling(tokenizer),
        compute_metrics,
        length_column="length",
    )
