"""Data helpers shared by the training commands: loading local files (text, JSON, CSV, CoNLL) or Hub datasets through
`datasets`, the biLM word vocabulary, windows and the language-model collator."""

import collections
import hashlib
import json
import lzma
import os
import zlib
from dataclasses import dataclass

import datasets
from datasets.exceptions import DatasetGenerationError
import fsspec
import torch

from basic_tokenization_elmo import BOS_WORD, EOS_WORD, MASK_WORD, PAD_WORD, UNK_WORD
from tokenization_elmo import ElmoTokenizer

from ..errors import DataError, first_line
from ..text_input import checked_lines


def settle_before_trainer(model, tokenizer, training_args):
    """Settle what Trainer would otherwise change, with a warning, on every run: the special-token ids of the config
    take the tokenizer's (ELMo adds its sentence boundaries inside the model, so they only have to agree), and
    batches are not pinned in memory when there is no accelerator to copy them to."""
    model.config.update({name: getattr(tokenizer, name) for name in ("bos_token_id", "eos_token_id", "pad_token_id")})
    if not torch.accelerator.is_available():
        training_args.dataloader_pin_memory = False


def data_format(path):
    """The `datasets` builder for a local file, from its extension (compressed files: the extension before .gz)."""
    name = os.path.basename(path)
    for suffix in (".gz", ".bz2", ".xz", ".zst"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    formats = {
        "txt": "text",
        "text": "text",
        "json": "json",
        "jsonl": "json",
        "csv": "csv",
        "tsv": "csv",
        "conll": "conll",
    }
    if extension not in formats:
        raise DataError(f"{path}: unknown file type {extension!r}; expected .txt, .json, .jsonl, .csv, .tsv or .conll")
    return formats[extension]


def read_conll(paths):
    """CoNLL files: one `token<TAB>tag` per line (the tag is the last column), a blank line between sentences.
    Yields {"tokens": [...], "tags": [...]}; a line without a tag is an error naming the file and line."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            tokens, tags = [], []
            for number, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line.strip():
                    if tokens:
                        yield {"tokens": tokens, "tags": tags}
                    tokens, tags = [], []
                    continue
                columns = line.split("\t") if "\t" in line else line.split()
                if len(columns) < 2:
                    raise DataError(f"{path}:{number}: expected 'token<TAB>tag', got {line!r}")
                tokens.append(columns[0])
                tags.append(columns[-1])
            if tokens:
                yield {"tokens": tokens, "tags": tags}


def load_splits(dataset_name=None, dataset_config_name=None, data_files=None, cache_dir=None):
    """A DatasetDict from a Hub dataset name or from local files ({split: [paths]}, all of one format).

    Local files are prepared into a cache folder named by a SHA-256 of their bytes (`content_cache_dir`): `datasets`
    keys local files by path and modification time, so a file rewritten within the same second, or copied with its
    time stamp kept, would otherwise give the examples of its old content."""
    if dataset_name is not None:
        return datasets.load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir)
    if not data_files:
        raise DataError("give a dataset name or local data files")
    for paths in data_files.values():
        for path in paths:
            check_has_data(path)
    cache_dir = content_cache_dir(data_files, cache_dir)
    formats = {data_format(p) for paths in data_files.values() for p in paths}
    if len(formats) != 1:
        raise DataError(f"all data files must have one format, got {sorted(formats)}")
    builder = formats.pop()
    if builder == "conll":  # no `datasets` builder for CoNLL: one generator per split
        try:
            return datasets.DatasetDict(
                {
                    split: datasets.Dataset.from_generator(
                        read_conll, gen_kwargs={"paths": list(paths)}, cache_dir=cache_dir
                    )
                    for split, paths in data_files.items()
                }
            )
        except DatasetGenerationError as e:  # datasets wraps the generator's errors: read_conll's one line
            if isinstance(e.__cause__, DataError):
                raise e.__cause__ from None
            raise
    tsv = any(p.endswith((".tsv", ".tsv.gz")) for paths in data_files.values() for p in paths)
    kwargs = {"delimiter": "\t"} if tsv else {}
    try:
        return datasets.load_dataset(builder, data_files=data_files, cache_dir=cache_dir, **kwargs)
    except DatasetGenerationError as e:  # the reader's own error (pyarrow's, pandas') is the cause
        files = ", ".join(p for paths in data_files.values() for p in paths)
        raise DataError(f"cannot read {files} as {builder}: {first_line(e.__cause__ or e)}") from None


def content_cache_dir(data_files, cache_dir=None):
    """`cache_dir` (default: datasets' cache) / elmo-transformers-files / the SHA-256 of the splits' names and their
    files' bytes, in order."""
    digest = hashlib.sha256()
    for split, paths in sorted(data_files.items()):
        digest.update(f"{split}\0{len(paths)}\0".encode())
        for path in paths:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 24):
                    digest.update(chunk)
            digest.update(b"\0")
    return os.path.join(cache_dir or datasets.config.HF_DATASETS_CACHE, "elmo-transformers-files", digest.hexdigest())


def check_has_data(path):
    """A local data file must exist, be UTF-8 text without NUL characters (`text_input`) and hold a non-blank line
    (compressed files are read through fsspec): `datasets` fails on an empty file with a bare StopIteration or a
    generic generation error, and reads UTF-16 without a byte-order mark as words full of NULs."""
    if os.path.isdir(path):
        raise DataError(f"{path} is a folder: give the text files in it")
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file")
    json_lines = path.endswith((".jsonl", ".jsonl.gz"))
    blank = True
    try:
        with fsspec.open(path, "rt", encoding="utf-8", compression="infer") as f:
            for number, line in enumerate(checked_lines(f, path), 1):  # every line, for the encoding
                blank = blank and not line.strip()
                if json_lines and line.strip():
                    json.loads(line)
    except json.JSONDecodeError as e:  # a cut file ends in half a record
        raise DataError(
            f"{path}, line {number}: not a JSON record ({e.msg}, column {e.colno}): a cut or damaged "
            "file? restore it, or fix that line"
        ) from None
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:  # a cut or damaged .gz, .bz2, .xz
        if isinstance(e, OSError) and e.errno is not None:  # the file system's (permissions): not the content
            raise
        raise DataError(
            f"{path}: cannot decompress it ({first_line(e)}): a cut download or a damaged file? restore it"
        ) from None
    if blank:
        raise DataError(f"{path}: the file is empty (no examples)")


def split_into_windows(words, max_words):
    """Cut a line of words into the fewest windows of at most `max_words`, of nearly equal size (no tiny tail)."""
    count = -(-len(words) // max_words)
    size, extra = divmod(len(words), count) if count else (0, 0)
    windows, start = [], 0
    for i in range(count):
        end = start + size + (i < extra)
        windows.append(words[start:end])
        start = end
    return windows


def text_to_windows(dataset, text_column, max_words, num_proc=None, split_words=None):
    """Lines of text -> rows {"words": window, "length": len(window)}; empty lines are dropped. A line's words are
    `split_words(line)`, the model's tokenizer's (`ElmoTokenizer.split_words`: its segmenter, and its warnings, so
    they run every time rather than come from datasets' cache), else `str.split()`.

    Each window is one biLM "sentence": the model wraps it in <S> ... </S> (stateless, unlike bilm-tf's windows
    that carry the LSTM state over), so a paragraph cut in several windows has one artificial boundary per cut.
    """
    if text_column not in dataset.column_names:
        raise DataError(
            f"text_column {text_column!r}: no such column in the data (its columns: {dataset.column_names})",
            text_column,
            argument="text_column",
        )
    feature = dataset.features[text_column]
    if getattr(feature, "dtype", None) not in ("string", "large_string"):
        raise DataError(
            f"column {text_column!r} holds {feature}, not lines of text: give a text file (one sentence "
            "per line) or a JSON/CSV column of strings"
        )

    def windows(batch):
        out = [w for line in batch[text_column] if line for w in split_into_windows(split(line), max_words)]
        return {"words": out, "length": [len(w) for w in out]}

    split = split_words or str.split
    return dataset.map(
        windows,
        batched=True,
        remove_columns=dataset.column_names,
        num_proc=num_proc,
        desc="windows",
        load_from_cache_file=split_words is None,
    )


# Never words of a vocabulary built from text: the first three head every vocab.txt; the tokenizer's mask and pad
# tokens stay its added tokens (a text that uses them as words must not make `mask_token_id` a softmax word).
SPECIAL_WORDS = (BOS_WORD, EOS_WORD, UNK_WORD, MASK_WORD, PAD_WORD)


def build_vocabulary(dataset, path, vocab_size=None, min_count=1):
    """Write a bilm-tf vocabulary file from the "words" column: `<S>`, `</S>`, `<UNK>`, then words by descending
    count (ties in alphabetical order), at most `vocab_size` lines in all, each seen at least `min_count` times;
    `<mask>` and `<pad>` in the text are left out (`SPECIAL_WORDS`).
    Returns the number of lines."""
    counts = collections.Counter()
    for batch in dataset.iter(batch_size=10_000):
        for words in batch["words"]:
            counts.update(words)
    for special in SPECIAL_WORDS:
        counts.pop(special, None)
    ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    if vocab_size is not None:
        ranked = ranked[: max(vocab_size - 3, 0)]
    if not ranked:
        raise DataError(f"no word occurs at least {min_count} times in the training data: empty vocabulary")
    write_words(path, [BOS_WORD, EOS_WORD, UNK_WORD, *ranked])
    return len(ranked) + 3


def write_words(path, words):
    """A vocabulary file: one word a line (bilm-tf's format; word id = line number)."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(w + "\n" for w in words)


@dataclass
class DataCollatorForElmoLanguageModeling:
    """Rows {"words": [...]} -> `input_ids` (char ids), `attention_mask` and the LM `labels` (word ids, then `</S>`,
    -100 after: one column more than the words, see `ElmoForLanguageModeling`).

    Written because no standard collator fits: `DataCollatorForTokenClassification` pads labels to the number of
    words, while the biLM has words + 1 targets per direction; and char ids are made here from the words (through
    the tokenizer's cached word table) instead of being stored, since 50 ids per word would make a pre-training
    corpus about 50 times larger on disk.
    """

    tokenizer: ElmoTokenizer

    def __post_init__(self):
        # The word vocabulary itself (get_vocab() and `convert_tokens_to_ids` would give the added "<pad>" token an id
        # past it).
        self.vocab = self.tokenizer.vocab
        self.unk_id = self.vocab[UNK_WORD]

    def __call__(self, features):
        sentences = [list(f["words"]) for f in features]
        batch = self.tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
        labels = torch.full((len(sentences), batch["input_ids"].shape[1] + 1), -100, dtype=torch.long)
        for i, words in enumerate(sentences):
            ids = [self.vocab.get(w, self.unk_id) for w in words + [EOS_WORD]]
            labels[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        batch["labels"] = labels
        return batch


def read_squad(paths):
    """SQuAD-format JSON files (`data` -> `paragraphs` -> `context`, `qas` -> `id`, `question`, `answers` with `text`
    and `answer_start`) as rows {"id", "question", "context", "answers": {"text": [...], "answer_start": [...]}}, the
    columns of the `squad` dataset on the Hub. A field missing or of another type is one line naming the file and
    where in it (an article, paragraph and question by number from 0)."""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            try:
                articles = json.load(f)["data"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise DataError(
                    f"{path}: not a SQuAD-format JSON file ({first_line(e)}): it needs a top-level "
                    '"data" list of articles with "paragraphs"'
                ) from None

        def field(record, key, kinds, where):
            value = record.get(key) if isinstance(record, dict) else None
            if not isinstance(value, kinds) or isinstance(value, bool):
                what = "missing" if not isinstance(record, dict) or key not in record else f"a {type(value).__name__}"
                wanted = " or ".join(kind.__name__ for kind in (kinds if isinstance(kinds, tuple) else (kinds,)))
                raise DataError(f"{path}: {where}{key} is {what}, where SQuAD's format has a {wanted}: fix the file")
            return value

        for a, article in enumerate(field({"data": articles}, "data", list, "")):
            for p, paragraph in enumerate(field(article, "paragraphs", list, f"article {a}: ")):
                where = f"article {a}, paragraph {p}: "
                context = field(paragraph, "context", str, where)
                for q, qa in enumerate(field(paragraph, "qas", list, where)):
                    at = f"{where}question {q}: "
                    answers = [
                        (
                            field(answer, "text", str, f"{at}answer {i}: "),
                            field(answer, "answer_start", int, f"{at}answer {i}: "),
                        )
                        for i, answer in enumerate(field(qa, "answers", list, at))
                    ]
                    yield {
                        "id": str(field(qa, "id", (str, int), at)),
                        "question": field(qa, "question", str, at),
                        "context": context,
                        "answers": {"text": [t for t, _ in answers], "answer_start": [s for _, s in answers]},
                    }


def is_squad_file(path):
    """Whether a local .json file is SQuAD's format (one JSON object with a "data" list), not JSON Lines."""
    if not path.endswith(".json"):
        return False
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError:
            return False
    return isinstance(value, dict) and isinstance(value.get("data"), list)
