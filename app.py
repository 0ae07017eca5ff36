"""The ELMo demo page, as a Hugging Face Space runs it: `python app.py` serves it (http://127.0.0.1:7860 unless
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT say otherwise) on the model in the folder `model/` beside this file when
there is one (a Space made by `elmo-transformers push MODEL OWNER/NAME --space`), else on the shipped default model.
`elmo-transformers demo --web` serves the same page with --model, --host and --port."""

from pathlib import Path

from transformers.utils import logging

import elmo_transformers
from elmo_transformers.demo import page

HERE = Path(__file__).parent  # not resolved: the package's demo/app.py links here, a Space holds a copy
MODEL = HERE / "model" if (HERE / "model" / "config.json").is_file() else Path(elmo_transformers.DEFAULT_MODEL)

logging.disable_progress_bar()
demo = page.build(str(MODEL))

if __name__ == "__main__":
    demo.launch()
