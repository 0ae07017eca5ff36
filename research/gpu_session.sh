#!/usr/bin/env bash
# One GPU session for issues 38 and 37 (run on the lent device machine, from the repository root, with OUT set):
# continue the shipped default model with `elmo-transformers pretrain` on the modern-English corpus for as many steps
# as fit in MINUTES (research/pretrain_within.py), pack the result in bf16 shards under 16 MB into $OUT, then time
# inference (research/gpu_figures.py). Carried beside the tree: .whl/ (the Python packages the machine lacks, or has
# at other versions) and .gpu/ (train.txt.xz and valid.txt.gz of research/prepare_modern_corpus.py).
# Env: MINUTES (training budget, probes included), BATCH (windows a step), LR, LOCAL=1 (no wheels, CPU, for a dry run).
set -uo pipefail
: "${OUT:?set OUT}"
MINUTES=${MINUTES:-6.8}
BATCH=${BATCH:-1024}
LR=${LR:-2e-3}
DATA=${DATA:-/tmp/elmo-data}
RUN=${RUN:-/tmp/elmo-lm}
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

timeout $(python3 -c "print(int(60 * $MINUTES + 40))") python3 research/pretrain_within.py --minutes "$MINUTES" \
  --output-dir "$RUN" -- --model-name-or-path elmo_transformers/models/elmo-en-small \
  --train-file "$DATA/train.txt.gz" --validation-file "$DATA/valid.txt.gz" --max-eval-samples 2000 --do-train --do-eval \
  --per-device-train-batch-size "$BATCH" --max-words 20 --bf16 "${DEVICE_ARGS[@]}" --learning-rate "$LR" \
  --lr-scheduler-type cosine --warmup-steps 200 --max-grad-norm 5.0 --logging-steps 50 --save-strategy steps \
  --save-steps 500 --save-total-limit 1 --report-to none --seed 0 --dataloader-num-workers 8 \
  --preprocessing-num-workers 8 ${EXTRA:-} 2>&1 | tr '\r' '\n' | grep --line-buffered -v -E 'it/s\]|s/it\]|Loading weights|Writing model|^ *$' \
  > "$OUT/train.log"
tail -n 30 "$OUT/train.log"

# The finished run, else its last checkpoint: bf16 shards of at most 15 MB (the device returns files under 16 MB).
python3 - "$RUN" "$OUT" <<'PY'
import glob, os, shutil, sys, tempfile
import torch
from modeling_elmo import ElmoForLanguageModeling
run, out = sys.argv[1:3]
checkpoints = sorted(glob.glob(f"{run}/checkpoint-*"), key=lambda p: int(p.rsplit("-", 1)[1]))
source = run if os.path.exists(f"{run}/model.safetensors") else checkpoints[-1]
print("packing", source)
staging = tempfile.mkdtemp()
ElmoForLanguageModeling.from_pretrained(source).to(torch.bfloat16).save_pretrained(staging, max_shard_size="15MB")
names = [n for n in os.listdir(staging) if n.endswith((".safetensors", ".index.json")) or n == "config.json"]
for name in names:
    shutil.copy(os.path.join(staging, name), out)
for name in ("trainer_state.json", "all_results.json"):
    path = os.path.join(source, name) if os.path.exists(os.path.join(source, name)) else os.path.join(run, name)
    if os.path.exists(path):
        shutil.copy(path, out)
print("packed", sorted(os.listdir(out)))
PY
timeout "${FIGURES_SECONDS:-50}" python3 research/gpu_figures.py 2>&1 | tee -a "$OUT/figures.txt"
