"""The model card (README.md) of a converted, trained or fine-tuned ELMo folder: Hub metadata plus a usage manual.

The card follows `config.architectures`: the pipeline tag, the Auto class of the usage snippet, the labels of a
task head, and the evaluation results Trainer wrote (`eval_results.json`, `test_results.json`) as model-index
metadata. Used by push.py (`model_card(folder, repo_id, ...).save(path)`) and space.py.
"""

import json
import re

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from configuration_elmo import ELMO_AUTO_MAP, ELMO_PIPELINES

from ..errors import ModelError

# Trainer's metric files and the data split each one measured.
RESULT_FILES = {"eval_results.json": ("eval_", "validation"), "test_results.json": ("test_", "test")}
# Trainer's bookkeeping in those files, not measures of the model.
NOT_METRICS = ("loss", "runtime", "samples_per_second", "steps_per_second", "epoch")

# Said when the caller has no figure of its own for this folder.
DEFAULT_CHECK = (
    "The port's tests reproduce AllenNLP 2.10.1's `Elmo` outputs (every biLM layer and the ELMo vector) on reference "
    "sentences within the float32 tolerance of its test suite (1e-5 + 1e-4 x |value|)."
)

CITATION = """@inproceedings{peters-etal-2018-deep,
    title = "Deep Contextualized Word Representations",
    author = "Peters, Matthew E. and Neumann, Mark and Iyyer, Mohit and Gardner, Matt and Clark, Christopher \
and Lee, Kenton and Zettlemoyer, Luke",
    booktitle = "Proceedings of NAACL-HLT 2018",
    year = "2018",
    pages = "2227--2237",
    url = "https://aclanthology.org/N18-1202",
}"""

TEMPLATE = """---
{{ card_data }}
---

# {{ name }}

{% if task == "feature-extraction" -%}
ELMo ({{ shape }}): the biLM of Peters et al. (2018), *Deep contextualized word representations*, as a PyTorch
model for `transformers`.
{%- else -%}
A {{ task }} head on ELMo ({{ shape }}), the biLM of Peters et al. (2018), *Deep contextualized word
representations*{% if base_model %}, fine-tuned from [{{ base_model }}]\
(https://huggingface.co/{{ base_model }}){% endif %}.
{%- endif %}
{% if source %}
Converted from: {{ source }}.
{% endif %}
## Usage

The code comes with the model (`trust_remote_code=True`). Where remote code is not allowed, `pip install` the
elmo-transformers project, call `elmo_transformers.register()` and leave out `trust_remote_code`.

```python
{% if task == "feature-extraction" -%}
import importlib
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ repo_id }}", trust_remote_code=True)
model = AutoModel.from_pretrained("{{ repo_id }}", trust_remote_code=True).eval()

batch = tokenizer(["The cat sat .", "ELMo"], padding=True, return_tensors="pt")  # words split on whitespace
out = model(**batch, output_hidden_states=True)
out.last_hidden_state   # [batch, words, {{ hidden }}] the scalar mix of the layers (the ELMo vector)
out.hidden_states       # {{ n_layers + 1 }} tensors [batch, words, {{ hidden }}]: the biLM layers
masked_mean = importlib.import_module(type(model).__module__).masked_mean
sentence_vectors = masked_mean(out.last_hidden_state, out.mask)  # [batch, {{ hidden }}], like TF-Hub's `default`
{%- elif task == "fill-mask" -%}
from transformers import AutoModelForPreTraining, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ repo_id }}", trust_remote_code=True)
model = AutoModelForPreTraining.from_pretrained("{{ repo_id }}", trust_remote_code=True).eval()

batch = tokenizer(["The cat sat on the mat ."], return_tensors="pt")  # words split on whitespace
out = model(**batch)
out.forward_logits, out.backward_logits  # [batch, words + 1, vocabulary]: each direction's next-word scores
{%- else -%}
from transformers import {{ auto_class }}, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ repo_id }}", trust_remote_code=True)
model = {{ auto_class }}.from_pretrained("{{ repo_id }}", trust_remote_code=True).eval()

batch = tokenizer(["The cat sat on the mat .", "ELMo"], padding=True, return_tensors="pt")  # whitespace words
logits = model(**batch).logits  # {{ "[batch, words, labels]: one prediction per word" if task == "token-classification"
    else "[batch, labels]" }}
{% if task == "token-classification" -%}
words = batch["attention_mask"].sum(-1).tolist()
predicted = [[model.config.id2label[i] for i in row[:n]] for row, n in zip(logits.argmax(-1).tolist(), words)]
{%- else -%}
predicted = [model.config.id2label[i] for i in logits.argmax(-1).tolist()]
{%- endif %}
{%- endif %}
```

Or `pipeline("{{ task }}", model="{{ repo_id }}", trust_remote_code=True{{ ', aggregation_strategy="simple"'
    if task == "token-classification" else "" }})`:
{{ pipeline_output }}
{% if labels %}
## Labels

{{ labels | length }} labels: {% for label in labels %}{{ markdown_code(label) }}{{ ", " if not loop.last
    else "." }}{% endfor %}
{% endif %}
{% if results %}
## Evaluation

| split | metric | value |
|---|---|---|
{% for r in results %}| {{ r.dataset_split }} | {{ markdown_code(r.metric_type, table=True) }} | {{ "%.4f"
    | format(r.metric_value) }} |
{% endfor %}
{% endif %}
## Layer layout

- `hidden_states[0]` is the context-free token embedding (char CNN, highway, projection) repeated twice:
  `[e ; e]`, as AllenNLP.
- `hidden_states[l]` (l = 1..{{ n_layers }}) is `[forward_l ; backward_l]`: the first {{ projection }} values are the
  forward LSTM, the last {{ projection }} the backward LSTM.
- The sentence-boundary tokens `<S>`/`</S>` are added inside the model and removed from every output; padded
  positions are zeros and `out.mask` marks the real words.

## Equivalence to AllenNLP

{{ check }}

Unlike AllenNLP, every call starts from a zero LSTM state (AllenNLP carries the previous batch's final state), so
the same sentence always gets the same vectors.

## Citation

```bibtex
{{ citation }}
```
"""

PIPELINE_OUTPUTS = {
    "feature-extraction": "one {hidden}-d ELMo vector per word.",
    "text-classification": "the label and its probability for each text.",
    "token-classification": "entities (groups of adjacent words with one label) with `start`/`end` character "
    "offsets into the text.",
    "fill-mask": "the likeliest words for the one `<mask>` word of each text, e.g. `He is the king of <mask> .`, "
    "ranked by the mean of the forward and backward log-probabilities, with their scores.",
}


def markdown_code(text, table=False):
    """`text` (a label or metric name from the folder, so anything) as one Markdown code span that shows it as it is
    and can add nothing to the card: control characters are shown escaped (a line break could end the span and
    start a heading), the fence is longer than any run of backticks inside, and in a table cell `|` is escaped."""
    text = "".join(json.dumps(c)[1:-1] if c.isspace() and c != " " or not c.isprintable() else c for c in str(text))
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def architecture(config):
    """(architecture name, Auto class, pipeline task) of a config dict, from the Auto map and the pipelines every
    saved config carries; a folder without `architectures` is an ElmoModel, and a model no pipeline lists is
    served by feature extraction."""
    name = (config.get("architectures") or ["ElmoModel"])[0]
    auto_classes = {reference.split(".")[-1]: auto for auto, reference in ELMO_AUTO_MAP.items() if auto != "AutoConfig"}
    if name not in auto_classes:
        raise ModelError(f"config.architectures names {name!r:.100}; expected one of {sorted(auto_classes)}")
    auto_class = auto_classes[name]
    tasks = [task for task, pipeline in ELMO_PIPELINES.items() if auto_class in pipeline["pt"]]
    return name, auto_class, tasks[0] if tasks else "feature-extraction"


def evaluation_results(folder, task, dataset):
    """EvalResults from Trainer's `*_results.json` in `folder` (a ModelFolder; Trainer's bookkeeping left out)."""
    results = []
    for file_name, (prefix, split) in RESULT_FILES.items():
        metrics = folder.results(file_name) or {}
        for key, value in sorted(metrics.items()):
            metric = key.removeprefix(prefix)
            if key.startswith(prefix) and metric not in NOT_METRICS and isinstance(value, (int, float)):
                results.append(
                    EvalResult(
                        task_type=task,
                        dataset_type=dataset or "custom",
                        dataset_name=dataset or "custom data",
                        dataset_split=split,
                        metric_type=metric,
                        metric_value=value,
                    )
                )
    return results


def card_licence(folder, license=None):
    """The card's licence fields: `license` where given; else those of a folder holding the licences of its weights'
    sources (`ModelFolder.licence`: a model derived from the default model); else apache-2.0, AllenNLP's ELMo's."""
    return {"license": license} if license else folder.licence() or {"license": "apache-2.0"}


def model_card(
    folder,
    repo_id,
    license=None,
    language=("en",),
    datasets=(),
    base_model=None,
    source=None,
    check=None,
    eval_dataset=None,
):
    """A ModelCard for the ELMo folder `folder` (a ModelFolder: its config gives the architecture, sizes and labels;
    its licence `card_licence`). `eval_dataset` names the data of the `*_results.json` (default: the first of
    `datasets`)."""
    config = folder.config
    _, auto_class, task = architecture(config)
    n_layers, projection = config["n_layers"], config["projection_dim"]
    id2label = config.get("id2label", {}) if task != "feature-extraction" else {}
    labels = [id2label[k] for k in sorted(id2label, key=int)]
    results = evaluation_results(folder, task, eval_dataset or (datasets[0] if datasets else None))
    data = ModelCardData(
        library_name="transformers",
        pipeline_tag=task,
        tags=["elmo", "custom_code"],
        **card_licence(folder, license),
        language=list(language) or None,
        datasets=list(datasets) or None,
        base_model=base_model,
        model_name=repo_id.split("/")[-1] if results else None,
        eval_results=results or None,
    )
    return ModelCard.from_template(
        data,
        template_str=TEMPLATE,
        name=repo_id.split("/")[-1],
        repo_id=repo_id,
        task=task,
        auto_class=auto_class,
        base_model=base_model,
        shape=f"{n_layers} x {config['lstm_dim']} LSTM, projection {projection}, {config['n_highway']} highway",
        source=markdown_code(source) if source else None,  # the user's words, shown as they are: no Markdown/HTML
        hidden=2 * projection,
        projection=projection,
        n_layers=n_layers,
        pipeline_output=PIPELINE_OUTPUTS[task].format(hidden=2 * projection),
        labels=labels,
        results=results,
        markdown_code=markdown_code,
        check=f"Checked: {markdown_code(check)}" if check else DEFAULT_CHECK,
        citation=CITATION,
    )
