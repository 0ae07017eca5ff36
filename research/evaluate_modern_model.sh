#!/usr/bin/env bash
# The before/after figures of the default model's card for one language-model folder, each with the same protocol and budget:
#   bash research/evaluate_modern_model.sh MODEL EVAL_DIR TRAIN_FILE
# MODEL: an ElmoForLanguageModeling folder (the shipped default model, or a new run's shipped folder);
# TRAIN_FILE: the text MODEL was trained on (tokenised), for evaluate_perplexity.py's unigram/bigram baselines.
# Env, each built when missing: MODERN (the tokenised modern-English splits; default: TRAIN_FILE's folder), OLD (the
# public-domain corpus tokenised by prepare_corpus.py; default EVAL_DIR/public-domain-en), EWT (UD English EWT as
# token<TAB>UPOS files; default EVAL_DIR/ud-ewt, from the public repository at the commit below, CC BY-SA 4.0),
# EWT_TRAIN (the EWT split the POS probe trains on; default train, dev where the train file cannot be had: then both
# models of a comparison are measured so), SHARED (../shared/data), PARTS (which figures, in this order; default all: fill-mask word-sense pos perplexity
# polarity; e.g. two processes with PARTS=polarity and the rest, OMP_NUM_THREADS=1 each, share two cores well).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: evaluate_modern_model.sh MODEL EVAL_DIR TRAIN_FILE}
EVAL=${2:?usage: evaluate_modern_model.sh MODEL EVAL_DIR TRAIN_FILE}
TRAIN_FILE=${3:?usage: evaluate_modern_model.sh MODEL EVAL_DIR TRAIN_FILE}
MODERN=${MODERN:-$(dirname "$TRAIN_FILE")}
OLD=${OLD:-$EVAL/public-domain-en}
EWT=${EWT:-$EVAL/ud-ewt}
EWT_COMMIT=15d613d8447b3478787d4c278730a1e48a945efb
EWT_TRAIN=${EWT_TRAIN:-train}
SHARED=${SHARED:-../shared/data}
export PYTHONPATH="$PWD/research${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$EVAL"

fill_mask() {
  # Fill-mask: everyday sentences, hits in the top 10.
  python research/evaluate_fill_mask.py --model "$MODEL" --sentences research/fill_mask_sentences.tsv --top-k 10 \
    --output "$EVAL/fill_mask.json"
  # The 40 everyday sentences, held out of the corpus (checked), one intended word each.
  python research/evaluate_fill_mask.py --model "$MODEL" --sentences research/fill_mask_everyday.tsv --top-k 10 \
    --check-corpus "$MODERN"/{train,valid,test}.txt.gz --output "$EVAL/fill_mask_everyday.json"
}

word_sense() {
  # Contextual word sense (WiC protocol): ROC AUC per layer and for the mix, and accuracy.
  python research/evaluate_word_sense.py --model "$MODEL" --pairs "$SHARED/eval/word-sense-pairs/pairs.jsonl" \
    --output "$EVAL/word_sense.json"
}

pos() {
  # Frozen biLM, the same head and budget as reproduce_default_model.sh step 5: the ELMo mix vs layer 0 only (with
  # word sense, what decides whether a model ships).
  if [ ! -s "$EWT/test.conll" ]; then  # gold UPOS of UD English EWT
    git clone --quiet https://github.com/UniversalDependencies/UD_English-EWT "$EWT/src"
    git -C "$EWT/src" checkout --quiet "$EWT_COMMIT"
    for split in train dev test; do
      python research/conllu_to_conll.py "$EWT/src/en_ewt-ud-$split.conllu" "$EWT/$split.conll"
    done
  fi
  for features in mix layer0; do
    MIX=(); [ "$features" = layer0 ] && MIX=(--scalar-mix-parameters '[0, -1e4, -1e4]')
    elmo-transformers finetune token-classification --model-name-or-path "$MODEL" "${MIX[@]}" \
      --train-file "$EWT/$EWT_TRAIN.conll" --validation-file "$EWT/dev.conll" --test-file "$EWT/test.conll" \
      --max-train-samples 4000 --output-dir "$EVAL/pos-ewt-$features" --do-train --do-eval --do-predict \
      --per-device-train-batch-size 32 --learning-rate 3e-3 --num-train-epochs 1 --report-to none --seed 0 \
      --save-strategy no
  done
}

perplexity() {
  # Held-out perplexity on the modern test split and on the old one (Moby-Dick), windows as in training.
  if [ ! -s "$OLD/test.txt.gz" ]; then  # the old model's held-out split (Moby-Dick), tokenised as it was trained
    mkdir -p "$OLD"
    python research/prepare_corpus.py "$SHARED/corpora/public-domain-en/test.txt.gz" "$OLD/test.txt.gz"
  fi
  python research/evaluate_perplexity.py --model "$MODEL" --train-file "$TRAIN_FILE" \
    --eval-file "$MODERN/test.txt.gz" "$OLD/test.txt.gz" --max-words 20 --output "$EVAL/perplexity.json"
}

polarity() {
  # The polarity set, the same way (the longest runs: ten epochs each).
  for features in mix layer0; do
    MIX=(); [ "$features" = layer0 ] && MIX=(--scalar-mix-parameters '[0, -1e4, -1e4]')
    elmo-transformers finetune sequence-classification --model-name-or-path "$MODEL" "${MIX[@]}" \
      --train-file "$SHARED/labeled/sentence-polarity/train.jsonl" \
      --validation-file "$SHARED/labeled/sentence-polarity/test.jsonl" --output-dir "$EVAL/polarity-$features" \
      --do-train --do-eval --per-device-train-batch-size 32 --learning-rate 3e-3 --num-train-epochs 10 \
      --report-to none --seed 0 --save-strategy no
  done
}

PARTS=${PARTS:-fill-mask word-sense pos perplexity polarity}
for part in $PARTS; do
  declare -F "${part//-/_}" > /dev/null || { echo "unknown part $part: fill-mask word-sense pos perplexity polarity" >&2; exit 2; }
done
for part in $PARTS; do
  "${part//-/_}"
done
