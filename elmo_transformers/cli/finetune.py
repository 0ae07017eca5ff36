"""`elmo-transformers finetune token-classification | sequence-classification | question-answering`: an ELMo task
head with Trainer.

The ELMo recipe by default: frozen biLM, trainable scalar mix + gamma with dropout 0.5, then
- token-classification (POS tagging, NER, ...; `ElmoForTokenClassification`): a BiLSTM task encoder, one label per
  word (ELMo reads whole words: no sub-word alignment). Data: local CoNLL files (`token<TAB>tag`, blank line between
  sentences), JSON/CSV with a word-list column and a tag-list column, or a Hub dataset. Metrics: word accuracy, and
  for BIO/IOB2 tag sets (every tag O or X-TYPE) span precision / recall / F1 (seqeval, conlleval's rule).
- sequence-classification (`ElmoForSequenceClassification`): the sentence vector is the masked mean of the ELMo
  vectors over its words, then a linear classifier (`--task-encoder lstm` puts a BiLSTM before the mean). Data: local
  JSON Lines / JSON / CSV files with a text and a label column, or a Hub dataset. Text is split into words on
  whitespace, as the tokenizer does. Metrics: accuracy and macro F1. Text pairs (SNLI, ...): `--text-pair-column`
  names the second text; each sentence gets its own ELMo vectors, related by an ESIM-style pair encoder (soft
  alignment, a BiLSTM of `--pair-encoder-dim`, mean and max pooling; `--pair-alignment false` pools each alone).
- question-answering (`ElmoForQuestionAnswering`): the question and the context each through the biLM, then a
  small BiDAF (attention flow, a modeling BiLSTM, start and end logits over the context's words). Data: SQuAD-format
  JSON files, or a dataset with question / context / answers columns (the Hub's `squad`). Metrics: SQuAD's exact
  match and F1 (`--max-answer-words` caps a predicted answer).

    elmo-transformers finetune token-classification --model-name-or-path ELMO_FOLDER \\
        --train-file train.conll --validation-file valid.conll --output-dir out --do-train --do-eval
    elmo-transformers finetune sequence-classification --model-name-or-path ELMO_FOLDER \\
        --train-file train.jsonl --validation-file test.jsonl --output-dir out --do-train --do-eval
    elmo-transformers finetune question-answering --model-name-or-path ELMO_FOLDER \\
        --train-file train.json --validation-file dev.json --output-dir out --do-train --do-eval

`elmo-transformers finetune TASK --help` lists the ELMo arguments; `--help-trainer` lists Trainer's
(TrainingArguments), which are all accepted.
"""

import sys

from . import import_package, option

TASKS = ("token-classification", "sequence-classification", "question-answering")  # finetuning.py functions, - as _


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: elmo-transformers finetune {{{','.join(TASKS)}}} [--help] ..."
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{usage}\n\n{__doc__}")
        return 0
    if not argv or argv[0] not in TASKS:
        print(usage, file=sys.stderr)
        return 2
    task = argv.pop(0)
    from .training_arguments import finetune_arguments

    parsed = finetune_arguments(argv, f"elmo-transformers finetune {task}", __doc__)  # before the model and data
    import_package()
    from ..training import finetuning

    with option("--model-name-or-path", parsed[0].model_name_or_path):
        return getattr(finetuning, task.replace("-", "_"))(*parsed)
