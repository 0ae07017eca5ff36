"""The settings of a run of `elmo-transformers embed` (`ElmoEmbedder.embed_file`), in one object: `EmbedSettings`.
Its fields that decide the output (`compare=True`) are what OUTPUT.partial/run.json records and what a resumed run
must match (`differences`). It imports nothing heavy, so that settings are checked before the model and torch load."""

import json
import os
from dataclasses import dataclass, field, fields

from ..errors import DataError
from .defaults import FILE_FORMATS, MAX_BATCH_WORDS, MAX_SENTENCE_WORDS, MODES, OUTPUT_DTYPES


# The fields whose argument (of `embed_file`, `ElmoEmbedder.embed_file`) has another name.
ARGUMENTS = {"mode": "output_format"}


@dataclass(frozen=True)
class EmbedSettings:
    """What a run of `embed` does, checked when made (`check`). `mode` ("all", "top", "average"; MODES) chooses the
    layers, stored in `output_dtype` in `file_format`; batches hold `batch_size` lines, or as many lines as fit
    `batch_words` padded words (the run sets the device's, `embed_file.default_batch_words`, where neither is given);
    a line longer than `max_sentence_words` is embedded in stateful windows. `input_sha256` (the text read), `model`
    (how the model is named, `ModelFolder.source`) and `identity` (`ModelFolder.identity`: what decides its numbers)
    are filled in by the run once it has read the input and the model (`dataclasses.replace`). The fields stand in
    the order a refused resume names the first difference in.

    The fields with `compare=False` change no number of the output, so run.json leaves them out and a resumed run may
    change them: `text_column` (the column read; the text it gives is `input_sha256`), `threads` (the model's CPU
    threads: `runtime.threads.cpu_threads`), `resume`, `overwrite` and `progress`."""

    file_format: str = "hdf5"
    input_sha256: str | None = None
    mode: str = "all"
    output_dtype: str = "float32"
    model: str | None = None
    batch_size: int | None = None
    batch_words: int | None = None
    max_sentence_words: int = MAX_SENTENCE_WORDS
    identity: dict | None = None
    text_column: str | None = field(default=None, compare=False)
    threads: int | None = field(default=None, compare=False)
    resume: bool = field(default=False, compare=False)
    overwrite: bool = field(default=False, compare=False)
    progress: bool = field(default=True, compare=False)

    def __post_init__(self):
        self.check()

    def check(self):
        """Refuse a setting that cannot be used, naming it: each number within its bound (a batch's memory grows with
        its padded words: MAX_BATCH_WORDS; more threads than CPUs only slow the LSTM's steps, and tens of thousands
        crash the threading libraries)."""
        if self.mode not in MODES:
            raise DataError(
                f"output_format {self.mode!r:.50}: one of {', '.join(MODES)}", self.mode, argument="output_format"
            )
        cpus = os.cpu_count() or 1
        for name, most, why in [
            ("batch_size", MAX_BATCH_WORDS, f"a batch holds at most {MAX_BATCH_WORDS:,} padded words"),
            ("batch_words", MAX_BATCH_WORDS, "the most a batch may hold (its memory grows with it)"),
            ("threads", cpus, f"this machine has {cpus} CPUs, and more threads only slow the LSTM"),
            ("max_sentence_words", MAX_BATCH_WORDS, "the longest window a batch may hold"),
        ]:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not (isinstance(value, int) and value > 0)):
                raise DataError(f"{name} {value!r:.50}: must be a positive int", value, argument=name)
            if value is not None and value > most:
                raise DataError(f"{name} {value:,}: at most {most:,} ({why})", value, argument=name)
        if self.max_sentence_words is None:
            raise DataError("max_sentence_words None: must be a positive int", argument="max_sentence_words")
        if self.batch_size is not None and self.batch_words is not None:
            raise DataError(
                f"batch_size {self.batch_size}: give either the lines or the words of a batch, not both",
                self.batch_size,
                argument="batch_size",
            )
        if self.file_format not in FILE_FORMATS:
            raise DataError(
                f"file_format {self.file_format!r:.50}: one of {', '.join(FILE_FORMATS)}",
                self.file_format,
                argument="file_format",
            )
        if self.output_dtype not in OUTPUT_DTYPES:
            why = ": neither HDF5 nor Parquet holds bfloat16" if self.output_dtype == "bfloat16" else ""
            raise DataError(
                f"output_dtype {self.output_dtype!r:.50}{why}; one of {', '.join(OUTPUT_DTYPES)}",
                self.output_dtype,
                argument="output_dtype",
            )

    def record(self):
        """The fields that decide the output, as run.json holds them: one JSON object, the model's identity's keys
        (`weights_sha256`, `config`, ...) beside the others, `"identity": null` for a model that has none."""
        recorded = {f.name: getattr(self, f.name) for f in fields(self) if f.compare and f.name != "identity"}
        return json.loads(json.dumps({**recorded, **(self.identity or {"identity": None})}))  # lists, not tuples

    def differences(self, recorded):
        """(name, recorded value, this run's value) for each key of `recorded` (a run.json) or of this run's
        `record()` whose values differ, in this run's order; a value that is an object on both sides (the model's
        config) is compared key by key, named `key.inner`. A key either side lacks is a difference too."""
        mine = self.record()
        found = []
        for key in [*mine, *(k for k in recorded if k not in mine)]:
            old, new = recorded.get(key), mine.get(key)
            if isinstance(old, dict) and isinstance(new, dict):
                found += [
                    (f"{key}.{k}", old.get(k), new.get(k))
                    for k in [*new, *(k for k in old if k not in new)]
                    if old.get(k) != new.get(k)
                ]
            elif old != new:
                found.append((key, old, new))
        return found
