"""`elmo-transformers pretrain`: train the ELMo biLM language model (`ElmoForLanguageModeling`) with Trainer: from
scratch, or continuing from an existing ElmoModel folder (e.g. converted AllenNLP weights) on domain text, as the
paper's domain fine-tuning.

Data: local text files (one sentence or paragraph per line; .txt or .txt.gz) or a Hub dataset with a text column.
Lines are split into windows of at most --max-words words; each window is one biLM sentence (<S> ... </S>).
The word vocabulary (bilm-tf format) is built from the training text unless --vocab-file is given or the starting
model already has one of the right size; it is saved with the model as vocab.txt.

Continuing a language model (a converted AllenNLP model with its published softmax, the shipped model, or an earlier
run) keeps its softmax and vocabulary, and its sampled softmax (bilm-tf's 8,192 negatives if it has none);
--add-words N first appends up to N of the new text's out-of-vocabulary words (seen --add-words-min-count times) to
both. --resume-from-checkpoint continues an interrupted run.

    elmo-transformers pretrain --model-name-or-path LM_FOLDER --train-file domain.txt --output-dir adapted \\
        --do-train --num-train-epochs 1 --learning-rate 2e-4 [--add-words 5000]

    elmo-transformers pretrain --train-file train.txt.gz --validation-file valid.txt.gz \\
        --output-dir out --do-train --do-eval --lstm-dim 256 --projection-dim 64 --n-negative-samples 1024

Prints and saves (eval_results.json) the forward, backward and average perplexity on the evaluation split.
"""

from . import import_package, option


def main(argv=None):
    from .training_arguments import pretrain_arguments

    parsed = pretrain_arguments(argv, "elmo-transformers pretrain", __doc__)  # before the model and data code
    import_package()
    from ..training.pretraining import pretrain

    with option("--model-name-or-path", parsed[0].model_name_or_path):
        return pretrain(*parsed)
