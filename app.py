"""The ELMo demo page, as a Hugging Face Space runs it: `python app.py` serves it (http://127.0.0.1:7860 unless
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT say otherwise) on the model in the folder `model/` beside this file when
there is one (a Space made by `elmo-transformers push MODEL OWNER/NAME --space`), else on the shipped default model.
`elmo-transformers demo --web` serves the same page with --model, --host and --port."""

import sys
from pathlib import Path

import elmo_transformers
from elmo_transformers.demo import server
from elmo_transformers.errors import UserError

HERE = Path(__file__).parent  # not resolved: the package's demo/app.py links here, a Space holds a copy
MODEL = HERE / "model" if (HERE / "model").is_dir() else Path(elmo_transformers.DEFAULT_MODEL)

try:
    demo = server.build_page(str(MODEL))
except UserError as e:  # no Gradio, a model that cannot be used: one line, as the command says it
    sys.exit(f"error: {e}")

if __name__ == "__main__":
    demo.launch(**server.launch_options())
