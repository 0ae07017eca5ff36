"""Memory with the published vocabulary size (V = 793,471): scoring sentences at batch 32 and a fill-mask batch of 32
texts stay within the model's size + 1 GB of RSS. Holding the logits of one batch at once would take
32 x 7 x 2 x V x 4 bytes = 1.4 GB here, so the bound fails unless the softmax runs in chunks."""

import pytest

import lm_memory  # research/lm_memory.py


@pytest.mark.slow
def test_scoring_and_fill_mask_at_the_published_vocabulary_size(tmp_path):
    figures = lm_memory.run(str(tmp_path), sentences=64, words=6)
    assert figures["vocab_size"] == 793_471
    budget = figures["model_mb"] + 1024
    load = figures["rss_after_load_mb"] - figures["rss_before_load_mb"]
    for step in ("scoring", "fill_mask"):
        assert load + figures[f"{step}_peak_above_loaded_mb"] <= budget, figures
