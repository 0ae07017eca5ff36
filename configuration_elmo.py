"""ELMo configuration for transformers: the fields of `options_elmo.ElmoOptions` (the original options.json, the
scalar mixes of AllenNLP's `Elmo`, the heads' settings) in transformers' config class."""

import copy
import os
import shutil
from typing import TYPE_CHECKING

from huggingface_hub.dataclasses import strict
from transformers import PretrainedConfig

try:  # loaded as remote code, the modules are one package
    from .options_elmo import ElmoOptions, check_dtype_names, check_range
except ImportError:  # installed with pip, they are top-level modules
    from options_elmo import ElmoOptions, check_dtype_names, check_range

if TYPE_CHECKING:  # never run; transformers' remote-code loader copies the relative imports it finds in the source
    from .pipeline_elmo import ElmoFeatureExtractionPipeline  # noqa: F401

# The model's code: modules at the repository root, installed as top-level modules, and saved into every model
# folder so that it loads with remote code (pyproject.toml's py-modules names them too; a test checks the two agree).
ELMO_MODULES = (
    "configuration_elmo",
    "modeling_elmo",
    "tokenization_elmo",
    "pipeline_elmo",
    "options_elmo",  # the config's fields, without transformers
    "basic_tokenization_elmo",  # words and their char ids, without transformers
    "bilm_elmo",  # the biLM in plain torch: what modeling_elmo's classes wrap and inference runs alone
    "kernels_elmo",  # the LSTM's GEMMs (float and int8), in-place cell, gate blocks
    "quantization_elmo",  # int8 through from_pretrained(..., quantization_config=...)
)
# The licences of what a model's weights were trained on, where its card points to them: `save_pretrained` carries the
# file into every folder of weights derived from them.
LICENCE_FILE = "LICENSE.md"

# Every class this repository ships, so that any saved folder loads with every Auto class.
ELMO_AUTO_MAP = {
    "AutoConfig": "configuration_elmo.ElmoConfig",
    "AutoModel": "modeling_elmo.ElmoModel",
    "AutoModelForPreTraining": "modeling_elmo.ElmoForLanguageModeling",
    "AutoModelForTokenClassification": "modeling_elmo.ElmoForTokenClassification",
    "AutoModelForSequenceClassification": "modeling_elmo.ElmoForSequenceClassification",
    "AutoModelForQuestionAnswering": "modeling_elmo.ElmoForQuestionAnswering",
}

# `config.custom_pipelines`: task -> the class in pipeline_elmo and the Auto class that loads the model for it.
ELMO_PIPELINES = {
    "feature-extraction": {"impl": "pipeline_elmo.ElmoFeatureExtractionPipeline", "pt": ["AutoModel"]},
    "text-classification": {
        "impl": "pipeline_elmo.ElmoTextClassificationPipeline",
        "pt": ["AutoModelForSequenceClassification"],
    },
    "token-classification": {
        "impl": "pipeline_elmo.ElmoTokenClassificationPipeline",
        "pt": ["AutoModelForTokenClassification"],
    },
    "fill-mask": {"impl": "pipeline_elmo.ElmoFillMaskPipeline", "pt": ["AutoModelForPreTraining"]},
    "question-answering": {
        "impl": "pipeline_elmo.ElmoQuestionAnsweringPipeline",
        "pt": ["AutoModelForQuestionAnswering"],
    },
}


@strict
class ElmoConfig(PretrainedConfig, ElmoOptions):
    """
    The configuration of an ELMo model: the fields of `ElmoOptions` (options_elmo.py, where each is documented),
    checked as there (`@strict` types, `validate_elmo` ranges and rules, on construction and on assignment), with
    transformers' own (`output_hidden_states`, `id2label`, `dtype`...).
    """

    model_type = "elmo"
    # The names transformers' configs share, for generic code (PEFT, layer-wise learning rates...): the biLM's
    # layers, and the word vocabulary (the LM softmax's, as the tokenizer's `vocab_size`). `hidden_size` is a property.
    attribute_map = {"num_hidden_layers": "n_layers", "vocab_size": "lm_vocab_size"}

    def __post_init__(self, **kwargs):
        self.store_lists()
        check_dtype_names({"dtype": self.dtype, "torch_dtype": kwargs.get("torch_dtype")})
        # A folder saved before a class or pipeline was added gets it too: this code has it.
        kwargs["auto_map"] = {**ELMO_AUTO_MAP, **(kwargs.get("auto_map") or {})}
        kwargs["custom_pipelines"] = {
            **copy.deepcopy(ELMO_PIPELINES),  # pipeline() edits it in place
            **(kwargs.get("custom_pipelines") or {}),
        }
        super().__post_init__(**kwargs)

    def save_pretrained(self, save_directory, push_to_hub=False, **kwargs):
        """Save as usual, plus the pipeline module beside the config.

        `pipeline(task, model=folder, trust_remote_code=True)` loads the classes of `custom_pipelines` from the
        folder's pipeline_elmo.py. It is this file's sibling wherever the code lives (installed, a checkout, or
        transformers' remote-code cache, which copies it because of the import under TYPE_CHECKING at the top): it
        is copied by path, not imported, so saving a config does not load transformers.pipelines.
        """
        super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline_elmo.py")
        target = os.path.join(save_directory, "pipeline_elmo.py")
        if not os.path.exists(target):
            shutil.copyfile(source, target)

    def __setattr__(self, name, value):
        """A field set after construction is checked as at construction: its type by `@strict`, its range here
        (`validate_elmo` checks the ranges of a new config, with the rules between fields)."""
        field_name = self.attribute_map.get(name, name)
        if field_name in self.__dict__:
            check_range(field_name, value)
        super().__setattr__(name, value)

    def validate_token_ids(self):
        """transformers warns of a special token id outside `[0, vocab_size)`. ELMo's ids name words of the
        tokenizer's vocabulary, which holds `<pad>` and `<mask>` after the `vocab_size` words of the LM softmax
        (they are never predicted), so that rule would warn on every model with a pad token; ELMo has no rule here."""


ElmoConfig.register_for_auto_class()
