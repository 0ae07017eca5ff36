"""Corpus perplexity of an ELMo biLM language model (`ElmoForLanguageModeling`), forward, backward and average."""

import torch

from modeling_elmo import lm_perplexities


@torch.no_grad()
def bilm_perplexities(model, collator, windows, batch_size, device):
    """Exact corpus perplexities: summed NLLs over every prediction, then one exp per direction."""
    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))  # similar lengths batch together
    totals = torch.zeros(3, dtype=torch.float64)
    for start in range(0, len(order), batch_size):
        batch = collator([{"words": windows[i]} for i in order[start : start + batch_size]]).to(device)
        out = model(**batch)
        totals += torch.stack([out.forward_nll.sum(), out.backward_nll.sum(), out.num_predictions.sum()]).double().cpu()
    return lm_perplexities(totals[0], totals[1], totals[2])

