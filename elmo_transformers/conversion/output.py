"""What the converters share: the one error for weights that do not fit their options (`mismatch_error`), and
writing a converted model into its folder (`save_atomically`, by `output_paths`' folder rules)."""

import os

from ..errors import ConversionError
from ..output_paths import write_folder_atomically

MAX_PROBLEMS_SHOWN = 10


def mismatch_error(path, problems, reference="the model config"):
    """A ConversionError listing the first `MAX_PROBLEMS_SHOWN` ways the weight file `path` does not match the
    options, separated by "; " on one line, and counting the rest: a short message whatever the file or the options
    hold."""
    shown = problems[:MAX_PROBLEMS_SHOWN]
    more = len(problems) - len(shown)
    if more:
        shown.append(f"... and {more:,} more")
    return ConversionError(f"{path} does not match {reference}: " + "; ".join(shown))


def save_atomically(model, tokenizer, output, overwrite=False, card=None):
    """Write `model`, `tokenizer` and the model card `card` (a huggingface_hub ModelCard, if any) into a staging
    folder and rename it to `output` (`output_paths.write_folder_atomically`)."""

    def write(staging):
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if card is not None:
            card.save(os.path.join(staging, "README.md"))

    return write_folder_atomically(write, output, overwrite)
