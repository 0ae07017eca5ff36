#!/usr/bin/env bash
# Reproduce the shipped default model (models/elmo-pd-small) from the public-domain corpus, end to end:
#   bash scripts/reproduce_default_model.sh [CORPUS_DIR] [WORK_DIR]
# CORPUS_DIR holds train/valid/test .txt.gz (one paragraph per line); default ../shared/data/corpora/public-domain-en.
# Seeded (--seed 0); the figures in models/elmo-pd-small/README.md come from this script on a 2-core CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/data/corpora/public-domain-en}
WORK=${2:-work/elmo-pd-small}
mkdir -p "$WORK/data"
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"

for split in train valid test; do  # punctuation split off, one sentence per line
  [ -s "$WORK/data/$split.txt.gz" ] || python scripts/prepare_corpus.py "$CORPUS/$split.txt.gz" "$WORK/data/$split.txt.gz"
done

DEVICE_ARGS=$(python -c "import torch; print('' if torch.cuda.is_available() else '--use_cpu')")  # bf16 on CPU needs --use_cpu
MAX_STEPS=${MAX_STEPS:-5000}
time python scripts/train_bilm.py \
  --train_file "$WORK/data/train.txt.gz" --validation_file "$WORK/data/valid.txt.gz" --max_eval_samples 2000 \
  --output_dir "$WORK/lm" --do_train --do_eval --max_steps "$MAX_STEPS" --per_device_train_batch_size 64 \
  --filters '[[1,32],[2,32],[3,64],[4,128],[5,256]]' --char_embedding_dim 16 --n_highway 1 \
  --lstm_dim 1024 --projection_dim 128 --n_layers 2 --n_negative_samples 2048 --vocab_size 32768 --max_words 20 \
  --bf16 $DEVICE_ARGS --learning_rate 2e-3 --lr_scheduler_type cosine --warmup_steps 200 --max_grad_norm 5.0 \
  --logging_steps 50 --save_strategy steps --save_steps 500 --save_total_limit 2 --report_to none --seed 0
