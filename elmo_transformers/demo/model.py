"""The model behind the demo, loaded once without transformers (`model_source.load_model`): its `ElmoEmbedder` for
the vectors and, for a language-model folder, its softmax (`bilm_elmo.ElmoLanguageModelCore`) sharing its biLM."""

from dataclasses import dataclass

from ..embedding.embedder import ElmoEmbedder
from ..model_folder import open_model
from ..model_source import load_model


@dataclass
class DemoModel:
    """`embedder` gives the vectors (the biLM of `lm` when there is one); `lm` is None for a biLM without a softmax,
    and `no_lm` then says why the language-model parts are off."""

    name: str
    embedder: ElmoEmbedder
    lm: object = None
    no_lm: str = ""

    @property
    def tokenizer(self):
        return self.embedder.tokenizer


def load(name, language_model=True):
    """The model `name` (a folder or Hub repo id, or its ModelFolder); with `language_model`, also its softmax when
    the folder has one. Anything unusable is one ModelError line."""
    source = open_model(name)
    name = str(source.name)
    if not language_model or not source.is_language_model:
        no_lm = (
            f"{name} is a biLM without a language-model softmax (no lm_vocab_size in its config.json), so "
            "it cannot score words: use a language-model folder (the shipped model, a conversion with "
            "with_lm=True, or the output of `elmo-transformers pretrain`)"
        )
        return DemoModel(name, ElmoEmbedder(source, device="cpu", runtime="torch"), no_lm=no_lm)
    lm, tokenizer = load_model(source, language_model=True)
    return DemoModel(name, ElmoEmbedder(lm.elmo, tokenizer), lm)
