"""AllenNLP's `ElmoEmbedder` and `batch_to_ids`, and TF-Hub's ELMo output names, on `ElmoModel` + `ElmoTokenizer`.

Code written for AllenNLP (`allennlp.commands.elmo.ElmoEmbedder`, `allennlp.modules.elmo.batch_to_ids`) or for
TF-Hub's `google/elmo` module keeps its method names, output names and array layouts. The numbers are ElmoModel's:
AllenNLP's within float32 rounding, except that every call starts from a zero LSTM state (AllenNLP's first call
after loading; AllenNLP carries each batch's final state into the next one).

`ElmoEmbedder` owns inference: a model loaded without transformers (`model_source.load_model`: the biLM as plain
torch, or an exported graph in onnxruntime) and its tokenizer's rules, and the device step every user of the vectors
runs (`layers`: pre-encoded batches in, the selected layers out), called by `embed` (`embed_file`), the demo page and
the methods here alike. An exported folder (`export onnx`) runs in onnxruntime without importing torch:
`embed_batch`, `embed_sentence`, `embed_sentences`, `embed_file` and `tf_hub_outputs` (NumPy arrays then) never load
it.
"""

import contextlib
import numbers
import os
import sys
from itertools import islice

import numpy as np

from ..errors import UserError
from ..model_folder import ModelFolder, open_model
from ..model_source import check_tokenizer, load_model
from ..models import DEFAULT_MODEL
from ..runtime import process_state, traits
from ..runtime.threads import cpu_threads, free_cpus
from .defaults import DEFAULT_BATCH_SIZE, MODES, OUTPUT_DTYPES


def as_numpy(array):
    """A float32 NumPy array of a torch tensor (any dtype or device) or of a NumPy array."""
    return array if isinstance(array, np.ndarray) else array.float().cpu().numpy()


def select_layers(hidden_states, mode):
    """The layers of `mode` ("all", "top" or "average"; MODES) of a batch's biLM layers (each [batch, words, 2P],
    torch tensors or NumPy arrays): [batch, n_layers + 1, words, 2P] (all) or [batch, words, 2P]."""
    if mode not in MODES:
        raise UserError(f"output_format {mode!r:.50}: one of {', '.join(MODES)}", mode, argument="output_format")
    if mode == "top":
        return hidden_states[-1]
    stack = np.stack if isinstance(hidden_states[0], np.ndarray) else sys.modules["torch"].stack
    layers = stack(hidden_states, 1)
    return layers if mode == "all" else layers.mean(1)


def no_grad(model):
    """torch.no_grad() for a PyTorch model; nothing for one that runs elsewhere (no torch imported)."""
    if traits(model).runtime != "torch":
        return contextlib.nullcontext()
    import torch

    return torch.no_grad()


def thread_count(threads):
    """ElmoEmbedder's `threads` as a count of CPU threads: None stays None (the process's own, as torch set them),
    "auto" is the CPUs free to this process now (`runtime.threads.free_cpus`, what `embed` takes), else a number
    from 1 to the machine's CPUs (more only slow the LSTM's steps, and tens of thousands crash the threading
    libraries)."""
    if threads is None:
        return None
    if threads == "auto":
        return free_cpus()
    cpus = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= cpus:
        raise UserError(
            f"threads {threads!r:.50}: give a number of CPU threads from 1 to {cpus} (this machine's "
            'CPUs), "auto" for the CPUs free now, or None for the process\'s own',
            threads,
        )
    return threads


def check_word_lists(batch, where):
    """Reject what is not a non-empty list of word lists, naming the fix (a str would be read as characters)."""
    if isinstance(batch, str) or not isinstance(batch, (list, tuple)):
        raise TypeError(f"{where} takes a list of word lists, e.g. [sentence.split()]; got {type(batch).__name__}")
    for i, sentence in enumerate(batch):
        if not isinstance(sentence, (list, tuple)):
            raise TypeError(
                f"{where}: sentence {i} is a {type(sentence).__name__}; pass each sentence as a list of words "
                "(e.g. sentence.split())"
            )


def batch_to_ids(batch):
    """AllenNLP's `batch_to_ids`: word lists -> LongTensor [batch, longest, 50] of char ids, 0 at padding."""
    check_word_lists(batch, "batch_to_ids")
    if not batch:
        raise UserError("batch_to_ids: empty batch (pass at least one sentence; [] is a sentence with no words)")
    from tokenization_elmo import ElmoTokenizer

    return ElmoTokenizer()(list(batch), is_split_into_words=True, padding=True, return_tensors="pt")["input_ids"]


def convert_original(options_file, weight_file):
    """ElmoModel and ElmoTokenizer converted in memory from an AllenNLP options.json and weights.hdf5, each a local
    path or the URL of one of AllenNLP's published files (fetched through the presets' cache, from the mirror in
    ELMO_TRANSFORMERS_ALLENNLP_URL where set)."""
    from ..conversion.allennlp import convert
    from ..conversion.presets import fetch_url

    return convert(
        *(
            fetch_url(str(f), argument) if str(f).startswith(("http://", "https://")) else f
            for f, argument in ((options_file, "options_file"), (weight_file, "weight_file"))
        )
    )


class ElmoEmbedder:
    """AllenNLP's `ElmoEmbedder`: word lists in, float32 NumPy arrays `[n_layers + 1, words, 2P]` out.

    `model` is a folder or Hub id (loaded by `model_source.load_model` as `ElmoModel` with its `ElmoTokenizer`;
    default: the shipped model, `DEFAULT_MODEL`), a folder `elmo-transformers export onnx` wrote (run by onnxruntime
    on the CPU in the dtype it was exported in; stateless, so `embed_window` is refused; a big batch runs in slices,
    `runtime.onnx.MAX_RUN_WORDS`), or a loaded ELMo model with its `tokenizer`. `runtime="onnxruntime"` runs a
    PyTorch folder's export, made on first use in the Hugging Face cache and reused (int8 with
    `quantization_config` or dtype "int8"). `device`
    defaults to the accelerator accelerate picks (cuda, mps, ... else cpu) for a model loaded here, and to where a
    given model already is; `dtype` (e.g. torch.bfloat16) is the compute dtype, outputs stay float32.
    `quantization_config=ElmoInt8Config()` loads the model with int8 LSTM weights, as `from_pretrained` does (CPU,
    float32 activations; the fastest way on a CPU, within the int8 rule of docs/speed.md). `threads`: the CPU
    threads of its calls (`thread_count`: a number, or "auto", the CPUs free when it is made; torch's are set for
    each call and restored after it, an exported model's onnxruntime threads when it loads, and `embed_file` takes
    them as its default); None, the default, leaves torch's as the process set them (docs/speed.md, "Threads in
    Python and Trainer"). The model is put in eval mode (no dropout).

    AllenNLP 0.x's call runs as written: `ElmoEmbedder(options_file, weight_file, cuda_device=-1)` (or the same as
    keywords) converts the original files in memory (`convert_original`: local paths, or the URLs of AllenNLP's
    published files); `cuda_device` -1 is the CPU, n the n-th GPU.
    """

    def __init__(
        self,
        model=DEFAULT_MODEL,
        tokenizer=None,
        device=None,
        dtype=None,
        quantization_config=None,
        *,
        runtime=None,
        threads=None,
        options_file=None,
        weight_file=None,
        cuda_device=None,
    ):
        if cuda_device is not None:
            if device is not None:
                raise TypeError("ElmoEmbedder: give device or AllenNLP's cuda_device, not both")
            device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        if options_file is not None or weight_file is not None:
            if options_file is None or weight_file is None:
                raise TypeError("ElmoEmbedder(options_file=..., weight_file=...): give both files")
            model, tokenizer = options_file, weight_file
        source, self.folder = None, None
        self.threads = threads = thread_count(threads)
        if isinstance(tokenizer, (str, os.PathLike)):  # AllenNLP's ElmoEmbedder(options_file, weight_file)
            if quantization_config is not None:
                raise TypeError(
                    "ElmoEmbedder(options_file, weight_file, quantization_config=...): convert the files "
                    "into a folder first and load that with the quantization_config"
                )
            source = str(tokenizer)
            model, tokenizer = convert_original(model, tokenizer)
            device = device or process_state().device
        if isinstance(model, (str, os.PathLike, ModelFolder)):  # (a ModelFolder: a command's resolved --model)
            self.folder = open_model(model)
            self.source = self.folder.source
            model, loaded_tokenizer = load_model(
                self.folder,
                dtype=dtype,
                quantization_config=quantization_config,
                device="auto" if device is None else device,
                runtime=runtime,
                threads=threads,
            )
            tokenizer = tokenizer or loaded_tokenizer
        else:
            if tokenizer is None:
                raise TypeError("ElmoEmbedder(model, tokenizer): pass the tokenizer with an already loaded model")
            if quantization_config is not None:
                raise TypeError(
                    "ElmoEmbedder(model, quantization_config=...): quantization happens when a model "
                    "loads; pass its folder or repo id, or load it with from_pretrained(..., "
                    "quantization_config=...) yourself"
                )
            self.source = source or getattr(model, "name_or_path", None)
            model = model.to(device=device, dtype=dtype).eval()
            check_tokenizer(model.config, tokenizer)  # (load_model checks what it loads)
        tokenizer = getattr(tokenizer, "basic", tokenizer)  # transformers' ElmoTokenizer: its rules
        self.model = model
        self.tokenizer = tokenizer
        self.traits = traits(model)

    def identity(self):
        """What decides the numbers this embedder computes (`ModelFolder.identity`: the model's weights, config,
        tokenizer and dtype; for runtime onnxruntime, its export's), which a resumed run compares; None for a model
        given already loaded, which has no folder to identify it."""
        folder = getattr(self.model, "folder", None) or self.folder  # an exported model's own folder
        return None if folder is None else folder.identity(self.traits.dtype)

    def encode(self, sentences):
        """The model's inputs for word lists: {"input_ids", "attention_mask"} as NumPy arrays."""
        return self.tokenizer.encode(list(sentences))

    def pinned(self, encoded):
        """`encoded` in page-locked memory where the model runs on a CUDA device (its copy in then overlaps the
        model's work), else as it is."""
        if self.traits.runtime != "torch" or self.model.device.type != "cuda":
            return encoded
        import torch

        return {name: torch.from_numpy(array).pin_memory() for name, array in encoded.items()}

    def forward(self, encoded, **kwargs):
        """The model on one pre-encoded batch (`encode`, or `pinned`), without gradients: its output, with the
        hidden states, as torch tensors on the model's device (NumPy arrays for an exported model)."""
        if self.traits.runtime == "torch":
            import torch

            device = self.model.device
            encoded = {
                name: torch.as_tensor(array).to(device, non_blocking=device.type == "cuda")
                for name, array in encoded.items()
            }
        with no_grad(self.model):
            return self.model(**encoded, output_hidden_states=True, return_dict=True, **kwargs)

    def layers(self, encoded, mode="all", output_dtype="float32"):
        """The device step: the layers of `mode` (`select_layers`) of one pre-encoded batch in `output_dtype`
        (OUTPUT_DTYPES), on their way to the host: (a NumPy array, or a CPU tensor being copied in; a function that
        waits for it). On a CUDA device the copy back is started here and waited for by the caller (a writer
        thread), so that the device goes on with the next batch; elsewhere it is made here."""
        if output_dtype not in OUTPUT_DTYPES:
            raise UserError(
                f"output_dtype {output_dtype!r:.50}: one of {', '.join(OUTPUT_DTYPES)}",
                output_dtype,
                argument="output_dtype",
            )
        selected = select_layers(self.forward(encoded).hidden_states, mode)
        if isinstance(selected, np.ndarray):
            return selected.astype(output_dtype, copy=False), lambda: None
        import torch

        selected = selected.to(getattr(torch, output_dtype))
        if selected.device.type != "cuda":
            return selected.cpu().numpy(), lambda: None
        host = selected.to("cpu", non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event.synchronize

    def threads_set(self):
        """Around one of its calls: torch's threads set to `threads` and restored after (nothing for None, or for an
        exported model, whose onnxruntime threads were set when it loaded)."""
        return contextlib.nullcontext() if self.threads is None else cpu_threads(self.threads, self.traits.runtime)

    def _run(self, sentences, **kwargs):
        with self.threads_set():
            return self.forward(self.pinned(self.encode(sentences)), **kwargs)

    def batch_to_embeddings(self, batch):
        """AllenNLP's layout: (activations [batch, n_layers + 1, longest, 2P] float32, mask [batch, longest] bool),
        zeros at padding, as torch tensors on the model's device (the CPU for an exported model)."""
        import torch

        check_word_lists(batch, "batch_to_embeddings")
        out = self._run(batch)
        layers = [torch.as_tensor(layer) for layer in out.hidden_states]
        return torch.stack(layers, dim=1).float(), torch.as_tensor(out.mask)

    def embed_batch(self, batch):
        """One array `[n_layers + 1, n, 2P]` per sentence of `batch`, n its word count (0 for an empty sentence).
        A sentence is a list of words, or a str that the tokenizer splits into words (its segmenter)."""
        if isinstance(batch, (list, tuple)):
            batch = [self.tokenizer.split_words(s) if isinstance(s, str) else s for s in batch]
        check_word_lists(batch, "embed_batch")
        if not batch:
            return []
        with self.threads_set():
            activations, wait = self.layers(self.encode(batch), "all")
            wait()
        return [np.asarray(activations[i, :, : len(words)]).copy() for i, words in enumerate(batch)]

    def embed_sentence(self, sentence):
        """`[n_layers + 1, n, 2P]` for one sentence given as a list of n words."""
        return self.embed_batch([sentence])[0]

    def embed_sentences(self, sentences, batch_size=DEFAULT_BATCH_SIZE):
        """Lazily, in input order: reads `batch_size` word lists at a time from any iterable, yields one array each."""
        if isinstance(batch_size, bool) or not (isinstance(batch_size, int) and batch_size > 0):
            raise UserError(f"batch_size must be a positive int, got {batch_size!r}")
        sentences = iter(sentences)
        while batch := list(islice(sentences, batch_size)):
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file,
        output_file_path,
        output_format="all",
        batch_size=None,
        forget_sentences=False,
        use_sentence_keys=False,
        **options,
    ):
        """AllenNLP's `embed_file`: the work of `elmo-transformers embed` with this embedder's model (see
        `elmo_transformers.embedding.embed_file.embed_file`, which also documents `options`); `input_file` is a path,
        "-" (stdin) or an open text file. `batch_size` lines a batch, or by default batches of `batch_words` padded
        words. AllenNLP's `forget_sentences` and `use_sentence_keys` are taken at their default, False, the one way
        offered. Returns the run's `Report` (what was done, where the time went)."""
        if forget_sentences:
            raise UserError(
                "forget_sentences=True is not offered: the HDF5 file always holds sentence_to_index "
                "(AllenNLP's default); leave forget_sentences out, and skip that dataset where you read "
                "the file"
            )
        if use_sentence_keys:
            raise UserError(
                "use_sentence_keys=True is not offered: each line is a sentence, its dataset keyed by "
                'its line number ("0", "1", ...); leave use_sentence_keys out, and to keep your '
                "own keys put them beside the text in a JSON lines or CSV file (text_column names the "
                "text column) and match them to the line numbers"
            )
        from .embed_file import embed_file  # (its outputs' modules load only for a file)

        options.setdefault("threads", self.threads)
        return embed_file(self, input_file, output_file_path, output_format, batch_size, **options)

    def embed_window(self, words, lstm_state=None, mode="all", output_dtype="float32"):
        """One window of a long text in the stateful mode of `ElmoModel.forward_windows`: the window is a sentence
        of its own and the biLM starts from `lstm_state`, the state this returns for the previous window (None for
        the first). Returns (its layers of `mode`, `[n_layers + 1, len(words), 2P]` for "all", in `output_dtype`;
        the state after this window)."""
        check_word_lists([words], "embed_window")
        out = self._run([words], lstm_state=lstm_state, return_lstm_state=True)
        selected = select_layers(out.hidden_states, mode)[0]
        return as_numpy(selected).astype(output_dtype, copy=False), out.lstm_state

    def tf_hub_outputs(self, inputs, sequence_len=None):
        """TF-Hub `google/elmo`'s output dict, as torch float32 tensors on the model's device (float32 NumPy arrays
        for an exported model, which runs without torch).

        `inputs`: raw strings (TF-Hub's `default` signature; split on whitespace) or word lists (its `tokens`
        signature; `sequence_len` keeps the first `sequence_len[i]` words of list i, dropping TF-Hub's "" padding).
        Returns `word_emb` [batch, longest, P] (the char CNN token embedding), `lstm_outputs1` ... `lstm_outputs{L}`
        [batch, longest, 2P] (each biLM layer, forward then backward), `elmo` [batch, longest, 2P] (the learned
        scalar mix), `default` [batch, 2P] (the mean of `elmo` over each sentence's words) and `sequence_len`
        [batch] (words per sentence). Padded positions are zeros.
        """
        if isinstance(inputs, str) or not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError("tf_hub_outputs takes a non-empty list of strings or of word lists")
        if all(isinstance(text, str) for text in inputs):
            if sequence_len is not None:
                raise UserError("sequence_len goes with word lists (TF-Hub's tokens signature), not raw strings")
            sentences = [self.tokenizer.split_words(text) for text in inputs]
        else:
            check_word_lists(inputs, "tf_hub_outputs")
            sentences = list(inputs)
            if sequence_len is not None:
                lengths = sequence_len.tolist() if hasattr(sequence_len, "tolist") else list(sequence_len)
                if any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in lengths):
                    raise TypeError(f"sequence_len must hold integer word counts, got {lengths[:5]!r}")
                lengths = [int(n) for n in lengths]
                if len(lengths) != len(sentences) or any(not 0 <= n <= len(s) for n, s in zip(lengths, sentences)):
                    raise UserError("sequence_len needs one length per word list, each between 0 and the list's size")
                sentences = [words[:n] for words, n in zip(sentences, lengths)]
        out = self._run(sentences)
        to_float = (lambda x: x) if self.traits.tensors == "np" else (lambda x: x.float())
        layers = [to_float(layer) for layer in out.hidden_states]
        elmo, mask = to_float(out.last_hidden_state), out.mask
        weights = mask[..., None].astype(np.float32) if self.traits.tensors == "np" else mask.unsqueeze(-1).float()
        outputs = {"word_emb": layers[0][..., : self.model.config.projection_dim]}
        outputs.update({f"lstm_outputs{k}": layer for k, layer in enumerate(layers[1:], start=1)})
        outputs.update(
            elmo=elmo, default=(elmo * weights).sum(1) / weights.sum(1).clip(min=1), sequence_len=mask.sum(1)
        )  # the default output: modeling_elmo.masked_mean, also for NumPy
        return outputs
