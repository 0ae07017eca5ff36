"""ELMo for transformers, as an installed package.

The model itself lives in the Hub remote-code modules at the repository root (`configuration_elmo`, `modeling_elmo`,
`tokenization_elmo`, `pipeline_elmo`, installed as top-level modules); this package holds what installed users get
on top of them. Importing it registers model type "elmo" with the Auto classes, so that

    import elmo_transformers
    model = AutoModelForTokenClassification.from_pretrained(folder)  # no trust_remote_code

loads with these installed classes, never with the folder's copies of the code. Pipelines, which transformers only
takes from a folder's code, take `pipeline_class=` instead (e.g. `ElmoTokenClassificationPipeline`).

Registering means importing torch and transformers (seconds), so the `elmo-transformers` console command runs this
file only once a command has parsed its arguments (`elmo_transformers_cli`, `cli.import_package`).

`DEFAULT_MODEL` is the folder of the model shipped inside the package (a small English ELMo, `elmo-en-small`), for
work without the Hub: `AutoModel.from_pretrained(elmo_transformers.DEFAULT_MODEL)`, `ElmoEmbedder()`.
"""

import transformers

import modeling_elmo
from configuration_elmo import ELMO_AUTO_MAP, ElmoConfig
from modeling_elmo import ElmoForLanguageModeling, ElmoForSequenceClassification, ElmoForTokenClassification, ElmoModel
from pipeline_elmo import (ElmoFeatureExtractionPipeline, ElmoFillMaskPipeline, ElmoTextClassificationPipeline,
                           ElmoTokenClassificationPipeline)
from quantization_elmo import ElmoInt8Config  # int8: from_pretrained(..., quantization_config=ElmoInt8Config())
from tokenization_elmo import ElmoTokenizer

# The same classes the saved configs' auto_map names for remote code.
transformers.AutoConfig.register(ElmoConfig.model_type, ElmoConfig, exist_ok=True)
transformers.AutoTokenizer.register(ElmoConfig, tokenizer_class=ElmoTokenizer, exist_ok=True)
for auto_class, reference in ELMO_AUTO_MAP.items():
    if auto_class != "AutoConfig":
        model_class = getattr(modeling_elmo, reference.split(".")[-1])
        getattr(transformers, auto_class).register(ElmoConfig, model_class, exist_ok=True)

from .embedding.embedder import ElmoEmbedder, batch_to_ids  # noqa: E402  (AllenNLP's names)
from .models import DEFAULT_MODEL  # noqa: E402

__all__ = [
    "DEFAULT_MODEL",
    "ElmoConfig",
    "ElmoEmbedder",
    "ElmoFeatureExtractionPipeline",
    "ElmoFillMaskPipeline",
    "ElmoForLanguageModeling",
    "ElmoForSequenceClassification",
    "ElmoForTokenClassification",
    "ElmoInt8Config",
    "ElmoModel",
    "ElmoTextClassificationPipeline",
    "ElmoTokenClassificationPipeline",
    "ElmoTokenizer",
    "batch_to_ids",
]
