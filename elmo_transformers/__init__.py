"""ELMo for transformers, as an installed package.

The model itself lives in the Hub remote-code modules at the repository root (`configuration_elmo`, `modeling_elmo`,
`tokenization_elmo`, `pipeline_elmo`, installed as top-level modules); this package holds what installed users get
on top of them. After `import elmo_transformers` the Auto classes know model type "elmo", so that

    import elmo_transformers
    model = AutoModelForTokenClassification.from_pretrained(folder)  # no trust_remote_code

loads with these installed classes, never with the folder's copies of the code. Pipelines, which transformers only
takes from a folder's code, take `pipeline_class=` instead (e.g. `ElmoTokenClassificationPipeline`).

The package is lazy (a module `__getattr__`, as transformers' own `__init__` defers its models): importing it loads
neither torch nor transformers. Its model classes, pipelines and `ElmoEmbedder` are imported when first touched, and
ELMo is registered with the Auto classes (`register`, which imports torch and transformers' model stack) when a
model class or pipeline is touched here, or when transformers' Auto classes are imported (`AfterImport`): so a
command's --help answers at once, and `embed` or `ElmoEmbedder` on an exported folder never load torch.

`DEFAULT_MODEL` is the folder of the model shipped inside the package (a small English ELMo, `elmo-en-small`), for
work without the Hub: `AutoModel.from_pretrained(elmo_transformers.DEFAULT_MODEL)`, `ElmoEmbedder()`.
"""

import importlib
import importlib.abc
import importlib.util
import sys

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
__all__ = ["DEFAULT_MODEL", *sorted(LAZY)]


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


_state = {"config": False, "tokenizer": False, "models": False, "placeholders": False, "busy": False}


class LazyModelClass(type):
    """A stand-in for one of modeling_elmo's classes in the Auto classes' mappings, registered when only
    transformers' Auto modules were imported (an exported folder's tokenizer imports them too, and modeling_elmo
    would bring transformers' whole model stack): its first use (`from_pretrained`, `config_class`...) imports
    modeling_elmo, registers the real classes in its place, and answers for the real class."""

    def real(cls):
        register(("models",))
        return getattr(importlib.import_module("modeling_elmo"), cls.__name__)

    def __getattr__(cls, name):
        return getattr(cls.real(), name)

    def __call__(cls, *args, **kwargs):
        return cls.real()(*args, **kwargs)


def register(parts=("config", "tokenizer", "models")):
    """Register model type "elmo" with the Auto classes: the config, the tokenizer and the model classes the saved
    configs' auto_map names for remote code. Imports torch and transformers (the models part: its model stack)."""
    if _state["busy"]:  # (importing modeling_elmo imports transformers' Auto modules, whose hook calls this again)
        return
    _state["busy"] = True
    try:
        import transformers

        from configuration_elmo import ELMO_AUTO_MAP, ElmoConfig

        if "config" in parts and not _state["config"]:
            transformers.AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
            _state["config"] = True
        if "tokenizer" in parts and not _state["tokenizer"]:
            from tokenization_elmo import ElmoTokenizer

            transformers.AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
            _state["tokenizer"] = True
        real = "models" in parts and not _state["models"]
        if real or ("placeholders" in parts and not _state["placeholders"]):
            modeling_elmo = importlib.import_module("modeling_elmo") if real else None
            for auto_class, reference in ELMO_AUTO_MAP.items():
                if auto_class == "AutoConfig":
                    continue
                name, auto = reference.split(".")[-1], getattr(transformers, auto_class)
                if real:
                    auto.register(ElmoConfig, getattr(modeling_elmo, name), exist_ok=True)
                else:
                    placeholder = LazyModelClass(name, (), {"__module__": "modeling_elmo"})
                    auto._model_mapping.register(ElmoConfig, placeholder, exist_ok=True)
            _state["models"] = _state["models"] or real
            _state["placeholders"] = True
    finally:
        _state["busy"] = False


# transformers' Auto modules -> what of ELMo each needs registered, once it has been imported
AUTO_MODULES = {
    "transformers.models.auto.configuration_auto": ("config",),
    "transformers.models.auto.tokenization_auto": ("config", "tokenizer"),
    "transformers.models.auto.modeling_auto": ("config", "tokenizer", "placeholders"),
}
def _initializing(name):
    module = sys.modules.get(name)
    return getattr(getattr(module, "__spec__", None), "_initializing", False)


_pending = set()


def _after(name):
    """Run after one of AUTO_MODULES, or another module of transformers or ELMo's, finished importing: register
    what the Auto modules imported so far need, once no import is half-way done (registering imports ELMo's modules,
    which import transformers' own: inside an import that is still running they would meet half-initialized
    modules). An Auto module imported inside another import is registered when that outer import finishes."""
    _pending.update(AUTO_MODULES.get(name, ()))
    if not _pending or _state["busy"]:  # (registering: it registers what it imports itself)
        return
    if importlib.util.find_spec("torch") is None:  # ELMo's classes need torch: a torch-free process (an exported
        return  # folder's tokenizer imports the Auto modules) registers nothing, and fails nothing
    if not any(_initializing(other) for other in list(sys.modules) if other != name):
        _register_imported()
        if all(_state[part] for part in ("config", "tokenizer", "placeholders")) and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)  # all registered: nothing more to watch


def _watched(name):
    """The modules whose end may end an import that an Auto module was imported inside of."""
    return name in AUTO_MODULES or name.split(".")[0] in ("transformers", __name__, *ROOT_MODULES)


ROOT_MODULES = ("configuration_elmo", "modeling_elmo", "tokenization_elmo", "pipeline_elmo", "kernels_elmo",
                "quantization_elmo")


class AfterImport(importlib.abc.MetaPathFinder):
    """A post-import hook: the modules in `names` are found and loaded as usual, then `action(name)` runs."""

    def __init__(self, watched, action):
        self.watched, self.action = watched, action

    def find_spec(self, fullname, path, target=None):
        if not self.watched(fullname):
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        else:
            return None
        spec.loader = _Loader(spec.loader, lambda: self.action(fullname))
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def __getattr__(self, name):  # get_source, get_filename, is_package, resource readers...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.then()



def _register_imported():
    """Register what the Auto modules imported so far need (registering can import more of them)."""
    while not _state["busy"] and (todo := {part for name in AUTO_MODULES if name in sys.modules
                                           for part in AUTO_MODULES[name] if not _state[part]}):
        register(tuple(todo))
    _pending.clear()


_register_imported()  # transformers' Auto classes may have been imported before this package
if not all(_state[part] for part in ("config", "tokenizer", "placeholders")):
    _finder = AfterImport(_watched, _after)
    sys.meta_path.insert(0, _finder)
