"""Corpus perplexity of an ELMo biLM language model (`ElmoForLanguageModeling`), forward, backward and average."""

import torch
from tqdm import tqdm

from modeling_elmo import lm_perplexities


@torch.no_grad()
def bilm_perplexities(model, collator, windows, batch_size, device, desc="scoring"):
    """Exact corpus perplexities: summed NLLs over every prediction, then one exp per direction (a progress bar
    named `desc` counts the batches)."""
    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))  # similar lengths batch together
    totals = torch.zeros(3, dtype=torch.float64)
    for start in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch"):
        batch = collator([{"words": windows[i]} for i in order[start : start + batch_size]]).to(device)
        out = model(**batch)
        totals += torch.stack([out.forward_nll.sum(), out.backward_nll.sum(), out.num_predictions.sum()]).double().cpu()
    return lm_perplexities(totals[0], totals[1], totals[2])


def file_perplexities(model, tokenizer, paths, max_words, batch_size, device):
    """Yield (path, {"words", forward/backward/average perplexity}) for each text file of `paths` (one sentence or
    paragraph a line; .txt or .txt.gz), split into words by `tokenizer` (its segmenter) and cut into windows of at
    most `max_words` words as pre-training cuts its text. Every file is read (and its encoding checked) before any is
    scored; the windows stay in datasets' Arrow files."""
    from .data import DataCollatorForElmoLanguageModeling, load_splits, text_to_windows

    windows = {
        path: text_to_windows(
            load_splits(data_files={"eval": [path]})["eval"], "text", max_words, split_words=tokenizer.split_words
        )
        for path in paths
    }
    collator = DataCollatorForElmoLanguageModeling(tokenizer)
    for path in paths:
        figures = bilm_perplexities(model, collator, windows[path]["words"], batch_size, device, desc=path)
        yield path, {"words": sum(windows[path]["length"]), **figures}
