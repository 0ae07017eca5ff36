#!/usr/bin/env bash
# One GPU session for issues 38 and 37 (run on the lent device machine, from the repository root, with OUT set):
# train one or more biLMs side by side with `elmo-transformers pretrain` on the modern-English corpus, each for as many
# steps as fit in MINUTES (research/pretrain_within.py), pack each result in bf16 shards under 16 MB into $OUT/NAME,
# then (FIGURES=1) time inference (research/gpu_figures.py). Carried beside the tree: .whl/ (the Python packages the
# machine lacks, or has at other versions) and .gpu/ (train.txt.xz and valid.txt.gz of research/prepare_modern_corpus.py).
#   bash research/gpu_session.sh ["NAME|pretrain arguments" ...]
# Each argument is one run (its model, learning-rate and seed arguments, which override the common ones); the default is stage 2's first continuation
# of the shipped model. Runs share the GPU, so each probe measures its step time beside the others.
# Env: MINUTES (training budget, probes included), BATCH (windows a step), WORKERS (data workers a run), LOCAL=1 (no
# wheels, CPU, for a dry run).
set -uo pipefail
: "${OUT:?set OUT}"
MINUTES=${MINUTES:-6.8}
BATCH=${BATCH:-1024}
WORKERS=${WORKERS:-8}
DATA=${DATA:-/tmp/elmo-data}
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=("continue|--model-name-or-path elmo_transformers/models/elmo-en-small --learning-rate 2e-3 --warmup-steps 200")
DEVICE_ARGS=()
if [ "${LOCAL:-0}" = 1 ]; then
  DEVICE_ARGS=(--use-cpu)
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/research${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$DATA"
xz -dc .gpu/train.txt.xz | gzip -1 > "$DATA/train.txt.gz" && cp .gpu/valid.txt.gz "$DATA/" || exit 1
{ nvidia-smi -L; lscpu | grep -E 'Model name|CPU\(s\):'; python3 -c \
  "import torch, transformers, datasets; print('torch', torch.__version__, 'transformers', transformers.__version__, 'datasets', datasets.__version__)"
} 2>&1 | tee "$OUT/figures.txt"

train_and_pack() {  # NAME ARGUMENTS: train into /tmp/elmo-NAME, pack into $OUT/NAME
  local name=$1 run=/tmp/elmo-$1
  shift
  mkdir -p "$OUT/$name"
  # shellcheck disable=SC2086  # the run's arguments are words
  timeout $(python3 -c "print(int(60 * $MINUTES + 40))") python3 research/pretrain_within.py --minutes "$MINUTES" \
    --probe-steps "${PROBE_STEPS:-60}" --output-dir "$run" -- \
    --train-file "$DATA/train.txt.gz" --validation-file "$DATA/valid.txt.gz" --max-eval-samples 2000 --do-train \
    --do-eval --per-device-train-batch-size "$BATCH" --max-words 20 --bf16 "${DEVICE_ARGS[@]}" \
    --lr-scheduler-type cosine --max-grad-norm 5.0 --logging-steps 50 --save-strategy steps --save-steps 500 \
    --save-total-limit 1 --report-to none --seed 0 --dataloader-num-workers "$WORKERS" \
    --preprocessing-num-workers "$WORKERS" $* 2>&1 | tr '\r' '\n' \
    | grep --line-buffered -v -E 'it/s\]|s/it\]|Loading weights|Writing model|^ *$' > "$OUT/$name/train.log"
  # The finished run, else its last checkpoint: bf16 shards of at most 15 MB (the device returns files under 16 MB).
  python3 - "$run" "$OUT/$name" >> "$OUT/$name/train.log" 2>&1 <<'PY'
import glob, os, shutil, sys, tempfile
import torch
from modeling_elmo import ElmoForLanguageModeling
run, out = sys.argv[1:3]
checkpoints = sorted(glob.glob(f"{run}/checkpoint-*"), key=lambda p: int(p.rsplit("-", 1)[1]))
source = run if os.path.exists(f"{run}/model.safetensors") else checkpoints[-1]
print("packing", source)
staging = tempfile.mkdtemp()
ElmoForLanguageModeling.from_pretrained(source).to(torch.bfloat16).save_pretrained(staging, max_shard_size="15MB")
for name in os.listdir(staging):
    if name.endswith((".safetensors", ".index.json")) or name == "config.json":
        shutil.copy(os.path.join(staging, name), out)
for name in ("trainer_state.json", "all_results.json", "budget.json", "vocab.txt"):
    path = os.path.join(source, name) if os.path.exists(os.path.join(source, name)) else os.path.join(run, name)
    if os.path.exists(path):
        shutil.copy(path, out)
print("packed", sorted(os.listdir(out)))
PY
}

for spec in "${RUNS[@]}"; do
  train_and_pack "${spec%%|*}" "${spec#*|}" &
done
wait
for spec in "${RUNS[@]}"; do
  echo "== ${spec%%|*}"; grep -E "budget:|run:|eval_|perplexity|packed|Error|error" "$OUT/${spec%%|*}/train.log" | tail -n 12
done
[ "${FIGURES:-0}" = 1 ] && timeout "${FIGURES_SECONDS:-50}" python3 research/gpu_figures.py 2>&1 | tee -a "$OUT/figures.txt"
exit 0
