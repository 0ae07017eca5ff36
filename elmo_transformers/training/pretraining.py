"""Continuing a language model on new text: the starting model's softmax grows by the text's frequent
out-of-vocabulary words (`elmo-transformers pretrain --add-words N`)."""

import collections

import torch
from torch import nn

from .data import SPECIAL_WORDS


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
    grown = nn.Linear(old.in_features, old.out_features + len(new_words), device=old.weight.device,
                      dtype=old.weight.dtype)
    grown.weight.copy_(torch.cat([old.weight, weight]))
    grown.bias.copy_(torch.cat([old.bias, bias]))
    model.lm_softmax = grown
    model.config.lm_vocab_size = grown.out_features
    return model
