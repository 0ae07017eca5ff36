#!/usr/bin/env bash
# The AMX speed session on an idle Intel Xeon with AMX (2 cores, nothing else running), from the repository root:
#   bash research/amx_session.sh
# writes research/results/amx-*.txt: the step profile (float32, bf16, int8 through torch's quantized linear and
# through oneDNN's), the model alone at batch 32 and larger batches (every runtime and dtype), and the whole
# 6,000-sentence file job of every runtime beside AllenNLP's (once), each model-alone run right after its job, at
# embed's default word budget, at 32 lines a batch, and (the fastest runtimes) at twice the default budget.
# About an hour on the idle machine: step profile 2 min, model alone 10 min (the first run also
# writes the random Original weights and exports the two ONNX folders into research/cache), the job beside AllenNLP
# 21 min (AllenNLP 6 of them), at 32 lines a batch 15 min, at 8,192 words 9 min.
# Env: PYTHON (the project's Python, default .venv/bin/python, else python3), ALLENNLP_PYTHON (AllenNLP 2.10.1's, made by
# research/allennlp_venv.sh), RESULTS (default research/results), ONLY (the parts to run, by name, default all:
# step-profile model-alone corpus corpus-batch32 corpus-8192), SMOKE=1 (a dry run of about 10 minutes on a busy
# machine: the Small size, 60 sentences, no AllenNLP, results under /tmp).
set -euo pipefail
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
ALLENNLP_PYTHON=${ALLENNLP_PYTHON:-research/allennlp-venv/bin/python}
RESULTS=${RESULTS:-research/results}
export PYTHONPATH="$PWD" HF_HUB_OFFLINE=1
SIZE=Original SENTENCES=6000 STEP_BATCHES="1 32 200" BATCHES="32 64 128" REPEATS=5
PEERS=(--allennlp-python "$ALLENNLP_PYTHON")
if [ "${SMOKE:-0}" = 1 ]; then
  SIZE=Small SENTENCES=60 STEP_BATCHES=32 BATCHES=32 REPEATS=1 PEERS=() RESULTS=${RESULTS/#research\/results/\/tmp\/amx-smoke}
elif [[ " ${ONLY:-corpus} " == *" corpus "* ]]; then
  "$ALLENNLP_PYTHON" -W ignore -c "from allennlp.modules.elmo import Elmo" || {
    echo "no AllenNLP at $ALLENNLP_PYTHON: bash research/allennlp_venv.sh, or set ALLENNLP_PYTHON" >&2
    exit 1
  }
fi
mkdir -p "$RESULTS"
BENCH=("$PYTHON" research/benchmark.py --size "$SIZE" --train-batch-size 0 --quality-model "")
ALL=(fp32 bf16 int8 int8-quantized ort-fp32 ort-int8)  # int8: the rule's kernel (oneDNN on AMX); int8-quantized: fbgemm

machine() {  # what every result file starts with: the command, the machine and how busy it is
  echo "# $*"
  echo "# $(lscpu | grep -E '^Model name' | tr -s ' '), family $(lscpu | awk '/^CPU family/ {print $3}') model" \
    "$(lscpu | awk '/^Model:/ {print $2}'), $(nproc) CPUs, AMX: $(grep -o -w -E 'amx_(bf16|int8|tile)' /proc/cpuinfo \
    | sort -u | tr '\n' ' ')"
  echo "# $("$PYTHON" -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", \
    onnxruntime.__version__)'), $(git log -1 --format='%h %s' | cut -c1-80)"
  echo "# $(date -u), load: $(cut -d' ' -f1-3 /proc/loadavg)"
}

ONLY=${ONLY:-step-profile model-alone corpus corpus-batch32 corpus-8192}

run() {  # PART NAME ARGS...: one benchmark run into $RESULTS/amx-NAME.txt, timed, if PART is in ONLY
  local part=$1 name=$2 start=$SECONDS
  shift 2
  [[ " $ONLY " == *" $part "* ]] || return 0
  { machine "${BENCH[*]} $*"; "${BENCH[@]}" "$@" 2>&1 | grep -v -E 'it/s\]|s/it\]|Warning|warn'; } \
    > "$RESULTS/amx-$name.txt"
  echo "# done $(date -u) in $((SECONDS - start)) s, load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RESULTS/amx-$name.txt"
  echo "$name: $((SECONDS - start)) s"
}

# 1. Where a step's time goes, and the limit of each piece (GEMM rate, copy bandwidth)
# shellcheck disable=SC2086  # the batch lists are words
run step-profile step-profile --batch-sizes --step-profile --step-profile-batches $STEP_BATCHES
# 2. The model alone at batch 32 and larger, every runtime (sentences of 20-25 words, median of REPEATS)
# shellcheck disable=SC2086
run model-alone model-alone --batch-sizes $BATCHES --repeats "$REPEATS" --dtypes "${ALL[@]}"
# 3. The whole job beside AllenNLP, embed's default word budget (4,096 on a CPU), once
run corpus corpus-$SENTENCES --corpus-sentences "$SENTENCES" --corpus-split train --repeats 1 --batch-sizes \
  --embed-default-threads --dtypes "${ALL[@]}" "${PEERS[@]}"
# 4. The same job at 32 lines a batch (the model-alone figures' batch), without AllenNLP
run corpus-batch32 corpus-$SENTENCES-batch32 --corpus-sentences "$SENTENCES" --corpus-split train --repeats 1 --batch-sizes \
  --embed-default-threads --corpus-batch-size 32 --dtypes "${ALL[@]}"
# 5. The fastest runtimes at a word budget twice the default
run corpus-8192 corpus-$SENTENCES-8192 --corpus-sentences "$SENTENCES" --corpus-split train --repeats 1 --batch-sizes \
  --embed-default-threads --corpus-batch-words 8192 --dtypes bf16 int8 ort-int8
