"""The arguments of the training functions (`finetuning.token_classification`, `finetuning.sequence_classification`,
`pretraining.pretrain`), besides Trainer's `TrainingArguments`: a dataclass each, whose fields the training commands
take as options (`cli/training_arguments.py` parses them) and a Python caller fills in. `model` is no option
(`init=False`, as TrainingArguments keeps what it works out): the ModelFolder of `model_name_or_path`, which the
command opens once (`open_model`) and the training function opens where no one has. This module imports neither
torch nor transformers: the commands' help is read from it."""

from dataclasses import dataclass, field

from ..model_folder import ModelFolder
from ..models import DEFAULT_MODEL


@dataclass
class HeadArguments:
    model_name_or_path: str = field(
        default=DEFAULT_MODEL,
        metadata={
            "help": "ElmoModel folder or Hub repo id (converted AllenNLP weights, "
            "`elmo-transformers pretrain` output) or an already fine-tuned head "
            "of the same kind (default: the shipped model)."
        },
    )
    freeze_bilm: bool = field(
        default=True, metadata={"help": "Keep the biLM frozen (the ELMo recipe); false: full fine-tuning."}
    )
    task_encoder: str | None = field(default=None, metadata={"help": "'linear' or 'lstm' (default: the script's)."})
    task_encoder_dim: int = field(default=128, metadata={"help": "Hidden size per direction of the 'lstm' encoder."})
    mix_l2_lambda: float = field(default=0.0, metadata={"help": "L2 penalty on the scalar-mix weights (paper: 0.001)."})
    dropout: float = field(default=0.5, metadata={"help": "Dropout on the ELMo vectors (AllenNLP default 0.5)."})
    scalar_mix_parameters: str | None = field(
        default=None,
        metadata={
            "help": "Fixed (untrained) mix weights before softmax, one per biLM layer, as JSON (AllenNLP's "
            "scalar_mix_parameters); e.g. '[0, -1e4, -1e4]' uses layer 0 (context-free) only."
        },
    )
    model: ModelFolder | None = field(default=None, init=False, repr=False)  # model_name_or_path, opened


@dataclass
class FinetuneDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "Local training file (.conll/.json/.jsonl/.csv)."})
    validation_file: str | None = field(default=None, metadata={"help": "Local evaluation file."})
    test_file: str | None = field(default=None, metadata={"help": "Local test file (predicted at the end)."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset name (instead of files)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    text_column: str | None = field(default=None, metadata={"help": "Column of the words or text."})
    label_column: str | None = field(default=None, metadata={"help": "Column of the labels."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N eval/test examples."})
    max_words: int | None = field(default=None, metadata={"help": "Truncate longer examples to this many words."})


@dataclass
class PretrainModelArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Existing ElmoModel / ElmoForLanguageModeling folder to start from (new softmax unless its "
            "vocabulary is reused); omit to train from scratch with the size arguments below."
        },
    )
    char_embedding_dim: int = field(default=16, metadata={"help": "From scratch: character embedding size."})
    filters: str = field(
        default="[[1,32],[2,32],[3,64],[4,128],[5,256],[6,512],[7,1024]]",
        metadata={"help": "From scratch: char-CNN filters as JSON [[width, number], ...]."},
    )
    n_highway: int = field(default=1, metadata={"help": "From scratch: highway layers."})
    lstm_dim: int = field(default=1024, metadata={"help": "From scratch: LSTM cell size."})
    projection_dim: int = field(default=128, metadata={"help": "From scratch: LSTM projection / token embedding size."})
    n_layers: int = field(default=2, metadata={"help": "From scratch: LSTM layers per direction."})
    n_negative_samples: int | None = field(
        default=None,
        metadata={
            "help": "Sampled softmax with this many negatives per batch (default: the starting "
            "LM's, or 8192 as bilm-tf; from scratch: none, the full softmax)."
        },
    )
    add_words: int = field(
        default=0,
        metadata={
            "help": "Continuing an LM: append up to this many of the training "
            "text's out-of-vocabulary words to its vocabulary and softmax."
        },
    )
    add_words_min_count: int = field(default=5, metadata={"help": "Of the words to add, only those seen this often."})
    lm_dropout: float = field(default=0.1, metadata={"help": "Dropout on the top biLM layer before the softmax."})
    model: ModelFolder | None = field(default=None, init=False, repr=False)  # model_name_or_path, opened


@dataclass
class PretrainDataArguments:
    train_file: list[str] | None = field(default=None, metadata={"help": "Training text files (.txt, .txt.gz)."})
    validation_file: list[str] | None = field(default=None, metadata={"help": "Evaluation text files."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset name (instead of files)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration."})
    text_column: str = field(default="text", metadata={"help": "Column holding the text."})
    validation_split_percentage: float = field(
        default=1.0,
        metadata={"help": "Percent of the training lines held out when there is no validation split (0: none)."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training lines."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N evaluation lines."})
    max_words: int = field(default=50, metadata={"help": "Split lines into windows of at most this many words."})
    vocab_file: str | None = field(default=None, metadata={"help": "bilm-tf vocabulary file (<S>, </S>, <UNK>, ...)."})
    vocab_size: int | None = field(default=50000, metadata={"help": "Building the vocabulary: most lines to keep."})
    min_count: int = field(default=1, metadata={"help": "Building the vocabulary: keep words seen this often."})
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for datasets.map."})
