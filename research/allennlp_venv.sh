#!/usr/bin/env bash
# A separate virtual environment with AllenNLP 2.10.1, for `research/benchmark.py --allennlp-python VENV/bin/python`
# (AllenNLP's own Elmo timed on the benchmark's weights):  bash research/allennlp_venv.sh [VENV]
# AllenNLP 2.10.1 asks for torch<1.13, which has no Python 3.11 build: it is installed without its dependencies on
# the same CPU torch as ours, plus what `allennlp.modules.elmo` imports. Its outputs then match the AllenNLP reference
# fixtures (tests/fixtures/allennlp-*) within 3e-6. AllenNLP on its own pinned stack (torch 1.12.1) needs Python 3.10:
#   python3.10 -m venv DIR && DIR/bin/pip install allennlp==2.10.1 "numpy<2"   (its thinc and torch predate numpy 2)
set -euo pipefail
VENV=${1:-research/allennlp-venv}
python3 -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install torch==2.13.0  # first, and pinned below, so that nothing pulls another (CUDA) build
echo "torch==2.13.0" > "$VENV/constraints.txt"
"$PIP" install --no-deps allennlp==2.10.1 cached-path==1.1.6 fairscale==0.4.6
"$PIP" install -c "$VENV/constraints.txt" numpy h5py "transformers==4.57.6" "spacy==3.8.*" google-cloud-storage boto3 \
  lmdb dill base58 more-itertools termcolor
# allennlp.data imports torchvision at module level (for image loading, which ELMo never uses); PyPI's torchvision
# would bring another torch, so an empty module stands in for it.
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p "$SITE/torchvision"
cat > "$SITE/torchvision/__init__.py" <<'PY'
"""Stand-in for torchvision in the AllenNLP benchmark environment: allennlp.data imports it, ELMo never uses it."""


def __getattr__(name):
    raise AttributeError(f"torchvision is a stand-in here (torchvision.{name} is not available)")
PY
"$VENV/bin/python" -W ignore -c "from allennlp.modules.elmo import Elmo; import allennlp; print('AllenNLP', allennlp.__version__)"
