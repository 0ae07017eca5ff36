#!/usr/bin/env bash
# A separate virtual environment with simple_elmo 0.9.2 (bilm-tf's graph, the TensorFlow ELMo users run today) for
# `research/benchmark.py --tensorflow-python VENV/bin/python`:  bash research/simple_elmo_venv.sh [VENV]
# Pins, and why:
# - python3.11: the project's Python; tensorflow-cpu 2.21 has wheels for it.
# - tensorflow-cpu==2.21.0: the current TensorFlow, CPU build (the benchmark times CPUs); it brings keras 3.
# - simple_elmo==0.9.2: its last release; its declared dependencies (h5py, numpy, smart_open, pandas, scipy; TensorFlow
#   only as an extra) do not conflict with TensorFlow's, so they install as declared.
# - tf-keras==2.21.0 --no-deps: simple_elmo builds its LSTMs with tf.compat.v1.nn.rnn_cell, which TensorFlow >= 2.16
#   serves from tf-keras when TF_USE_LEGACY_KERAS=1 (the benchmark's worker sets it). tf-keras declares `tensorflow`,
#   the full build, which would install over tensorflow-cpu's files; it needs nothing that tensorflow-cpu lacks.
set -euo pipefail
VENV=${1:-research/simple-elmo-venv}
python3.11 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install "tensorflow-cpu==2.21.0" "simple_elmo==0.9.2"
"$PIP" install --no-deps "tf-keras==2.21.0"
TF_USE_LEGACY_KERAS=1 "$VENV/bin/python" -c "import tensorflow as tf, tf_keras, simple_elmo
print('TensorFlow', tf.__version__, 'tf-keras', tf_keras.__version__, 'simple_elmo imports')" 2>&1 | tail -1
