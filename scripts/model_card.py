"""The model card (README.md) of a converted or trained ELMo folder: Hub metadata plus a usage manual.

Used by push_to_hub.py; any script that writes a model folder can call `write_model_card` too.
"""

import json
import os

from huggingface_hub import ModelCard, ModelCardData

# Said when the caller has no figure of its own for this folder.
DEFAULT_CHECK = (
    "The port's tests reproduce AllenNLP 2.10.1's `Elmo` outputs (every biLM layer and the ELMo vector) within "
    "1e-5 absolute on reference sentences."
)

CITATION = """@inproceedings{peters-etal-2018-deep,
    title = "Deep Contextualized Word Representations",
    author = "Peters, Matthew E. and Neumann, Mark and Iyyer, Mohit and Gardner, Matt and Clark, Christopher and Lee, Kenton and Zettlemoyer, Luke",
    booktitle = "Proceedings of NAACL-HLT 2018",
    year = "2018",
    pages = "2227--2237",
    url = "https://aclanthology.org/N18-1202",
}"""

TEMPLATE = """---
{{ card_data }}
---

# {{ name }}

ELMo ({{ shape }}): the biLM of Peters et al. (2018), *Deep contextualized word representations*, as a PyTorch
model for `transformers` (remote code: load it with `trust_remote_code=True`).
{% if source %}
Converted from: {{ source }}.
{% endif %}
## Usage

```python
import importlib
from transformers import AutoModel, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{{ repo_id }}", trust_remote_code=True)
model = AutoModel.from_pretrained("{{ repo_id }}", trust_remote_code=True).eval()

batch = tokenizer(["The cat sat .", "ELMo"], padding=True, return_tensors="pt")  # words split on whitespace
out = model(**batch, output_hidden_states=True)
out.last_hidden_state   # [batch, words, {{ hidden }}] the scalar mix of the layers (the ELMo vector)
out.hidden_states       # {{ n_layers_plus_one }} tensors [batch, words, {{ hidden }}]: the biLM layers
masked_mean = importlib.import_module(type(model).__module__).masked_mean
sentence_vectors = masked_mean(out.last_hidden_state, out.mask)  # [batch, {{ hidden }}], like TF-Hub's `default`
```

Or `pipeline("feature-extraction", model="{{ repo_id }}", trust_remote_code=True)`: one {{ hidden }}-d ELMo vector
per word.

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


def model_card(folder, repo_id, license="apache-2.0", language=("en",), datasets=(), base_model=None, source=None,
               check=None):
    """A ModelCard for the ELMo folder `folder` (its config.json gives the layer sizes)."""
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    n_layers, projection = config["n_layers"], config["projection_dim"]
    shape = f"{n_layers} x {config['lstm_dim']} LSTM, projection {projection}, {config['n_highway']} highway"
    data = ModelCardData(
        library_name="transformers",
        pipeline_tag="feature-extraction",
        tags=["elmo", "custom_code"],
        license=license,
        language=list(language) or None,
        datasets=list(datasets) or None,
        base_model=base_model,
    )
    return ModelCard.from_template(
        data,
        template_str=TEMPLATE,
        name=repo_id.split("/")[-1],
        repo_id=repo_id,
        shape=shape,
        source=source,
        hidden=2 * projection,
        projection=projection,
        n_layers=n_layers,
        n_layers_plus_one=n_layers + 1,
        check=check or DEFAULT_CHECK,
        citation=CITATION,
    )


def write_model_card(folder, repo_id, **kwargs):
    """Write README.md into `folder`; returns its path."""
    path = os.path.join(folder, "README.md")
    model_card(folder, repo_id, **kwargs).save(path)
    return path
