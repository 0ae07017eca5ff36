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

