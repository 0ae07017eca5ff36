"""The model behind the demo, loaded once: the biLM for the vectors and, for a language-model folder, its softmax."""

import os
from dataclasses import dataclass

import torch
from transformers import pipeline

from pipeline_elmo import ElmoFillMaskPipeline

from ..model_source import load_model, open_model


@dataclass
class DemoModel:
    """`elmo` gives the vectors (the biLM of `lm` when there is one); `lm` and `fill` (its fill-mask pipeline) are
    None for a biLM without a softmax, and `no_lm` then says why the language-model parts are off."""

    name: str
    tokenizer: object
    elmo: torch.nn.Module
    lm: torch.nn.Module | None = None
    fill: ElmoFillMaskPipeline | None = None
    no_lm: str = ""


def load(name, language_model=True):
    """The model `name` (a folder or Hub repo id), loaded by `model_source.load_model`; with `language_model`, also
    its softmax when the folder has one. Anything unusable is one ModelError line."""
    source = open_model(name)
    if not language_model or not source.is_language_model:
        no_lm = (f"{name} is a biLM without a language-model softmax (no lm_vocab_size in its config.json), so "
                 "it cannot score words: use a language-model folder (the shipped model, a conversion with "
                 "with_lm=True, or the output of `elmo-transformers pretrain`)")
        model, tokenizer = load_model(source, runtime="torch")
        return DemoModel(str(name), tokenizer, model, no_lm=no_lm)
    lm, tokenizer = load_model(source, language_model=True)
    fill = pipeline("fill-mask", model=lm, tokenizer=tokenizer, pipeline_class=ElmoFillMaskPipeline)
    return DemoModel(str(name), tokenizer, lm.elmo, lm, fill)


def model_title(folder):
    """What the page calls the model in `folder`: its model card's title (README.md's first `# ` heading: a Space
    holds the model as `model/`), else the folder's name."""
    try:
        with open(os.path.join(folder, "README.md"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("# "):
                    return line[2:].strip()
    except (OSError, UnicodeDecodeError):
        pass
    return os.path.basename(os.path.normpath(os.path.abspath(folder)))  # (a name for `.` too)
