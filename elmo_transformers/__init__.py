"""ELMo for transformers, as an installed package.

The model itself lives in the Hub remote-code modules at the repository root (`configuration_elmo`, `modeling_elmo`,
`tokenization_elmo`, `pipeline_elmo` and the modules they import, installed as top-level modules:
`configuration_elmo.ELMO_MODULES`); this package holds what installed users get on top of them.

`register()` registers model type "elmo" with transformers' Auto classes, explicitly, so that

    import elmo_transformers
    elmo_transformers.register()
    model = AutoModelForTokenClassification.from_pretrained(folder)  # no trust_remote_code

loads with these installed classes, never with the folder's copies of the code. It is called where it is first
needed: touching a model class, the config or a pipeline through this package (`elmo_transformers.ElmoModel`), and
the commands that load through the Auto classes. Pipelines, which transformers only takes from a folder's code, take
`pipeline_class=` instead (e.g. `ElmoTokenClassificationPipeline`).

The package is lazy (a module `__getattr__`, as transformers' own `__init__` defers its models): importing it loads
neither torch nor transformers, so that a command's --help answers at once, and `embed` or `ElmoEmbedder` (which run
without transformers) start as fast as torch.

`DEFAULT_MODEL` is the folder of the model shipped inside the package (a small English ELMo, `elmo-en-small`), for
work without the Hub: `AutoModel.from_pretrained(elmo_transformers.DEFAULT_MODEL)` after `register()`,
`ElmoEmbedder()`.
"""

import importlib

from .models import DEFAULT_MODEL

# public name -> (module, whether touching it registers ELMo with the Auto classes first)
LAZY = {
    "ElmoConfig": ("configuration_elmo", True),
    "ElmoForLanguageModeling": ("modeling_elmo", True),
    "ElmoForSequenceClassification": ("modeling_elmo", True),
    "ElmoForTokenClassification": ("modeling_elmo", True),
    "ElmoModel": ("modeling_elmo", True),
    "ElmoFeatureExtractionPipeline": ("pipeline_elmo", True),
    "ElmoFillMaskPipeline": ("pipeline_elmo", True),
    "ElmoTextClassificationPipeline": ("pipeline_elmo", True),
    "ElmoTokenClassificationPipeline": ("pipeline_elmo", True),
    "ElmoInt8Config": ("quantization_elmo", True),  # int8: from_pretrained(..., quantization_config=ElmoInt8Config())
    "ElmoTokenizer": ("tokenization_elmo", False),
    "ElmoEmbedder": (".embedding.embedder", False),  # AllenNLP's names
    "batch_to_ids": (".embedding.embedder", False),
}
__all__ = ["DEFAULT_MODEL", "register", *sorted(LAZY)]


def __getattr__(name):
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, registers = LAZY[name]
    if registers:
        register()
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *LAZY})


def register():
    """Register model type "elmo" with transformers' Auto classes: `AutoConfig`, `AutoTokenizer` and the Auto class of
    every model class (`configuration_elmo.ELMO_AUTO_MAP`, the list saved configs name for remote code), with the
    installed classes. Imports torch and transformers' model stack; any number of times, before or after transformers
    is imported. A process the work is spawned into calls it too (a module that uses the Auto classes calls it when
    imported)."""
    import transformers

    import modeling_elmo
    from configuration_elmo import ELMO_AUTO_MAP, ElmoConfig
    from tokenization_elmo import ElmoTokenizer

    transformers.AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
    transformers.AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
    for auto_class, reference in ELMO_AUTO_MAP.items():
        if auto_class != "AutoConfig":
            model_class = getattr(modeling_elmo, reference.rsplit(".", 1)[1])
            getattr(transformers, auto_class).register(ElmoConfig, model_class, exist_ok=True)
