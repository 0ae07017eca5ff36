"""The model behind the demo, loaded once: the biLM for the vectors and, for a language-model folder, its softmax."""

from dataclasses import dataclass

import torch
from transformers import AutoConfig, AutoModel, AutoModelForPreTraining, AutoTokenizer, pipeline

from pipeline_elmo import ElmoFillMaskPipeline

from ..model_source import check_tokenizer, loading, resolve_model


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
    """The model `name` (a folder or Hub repo id: `model_source.resolve_model` checks it is ELMo's); with
    `language_model`, also its softmax when the folder has one. Anything unusable is one ModelError line."""
    folder = resolve_model(name)
    with loading(name):
        config = AutoConfig.from_pretrained(folder)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        check_tokenizer(config, tokenizer)
        if not language_model or config.lm_vocab_size is None:
            no_lm = (f"{name} is a biLM without a language-model softmax (no lm_vocab_size in its config.json), so "
                     "it cannot score words: use a language-model folder (the shipped model, a conversion with "
                     "with_lm=True, or the output of `elmo-transformers pretrain`)")
            return DemoModel(str(name), tokenizer, AutoModel.from_pretrained(folder, config=config).eval(),
                             no_lm=no_lm)
        lm = AutoModelForPreTraining.from_pretrained(folder, config=config).eval()
        lm.check_vocabulary(tokenizer)
    fill = pipeline("fill-mask", model=lm, tokenizer=tokenizer, pipeline_class=ElmoFillMaskPipeline)
    return DemoModel(str(name), tokenizer, lm.elmo, lm, fill)
