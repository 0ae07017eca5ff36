"""ELMo for transformers, as an installed package: what installed users get on top of the model's own modules (the
remote-code modules at the repository root, `configuration_elmo.ELMO_MODULES`, installed as top-level modules).

`register()` registers model type "elmo" with transformers' Auto classes, so that a folder loads with these installed
classes (no `trust_remote_code`); it runs where first needed (a model class, the config or a pipeline touched through
this package, the commands that load through the Auto classes) or by the user's call (docs/hub-and-pipelines.md).
The package is lazy (a module `__getattr__`): importing it loads neither torch nor transformers. `DEFAULT_MODEL` is
the folder of the small English ELMo shipped inside it. `push` uploads a model folder to the Hub, as
`elmo-transformers push` does (`hub/push.py`).
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
    "push": (".hub.push", False),  # what `elmo-transformers push` does, for a Python caller
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
