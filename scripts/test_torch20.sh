#!/usr/bin/env bash
# The torch 2.0.1 leg: ipuflow with the torch that poptorch 3.3 and 3.4 (the last Poplar SDKs) are built
# for, numpy 1.x and transformers 4.29 (optimum-graphcore's), in a second environment beside .venv:
# the executor and poptorch tests (tests/execution, the poptorch stand-in included, Hugging Face models
# placed on its IPUs by layers_per_ipu among them, and the commands' poptorch tests) and one
# `ipuflow train` / `evaluate` / `predict` on the native executor and on the stand-in.
# Usage: bash scripts/test_torch20.sh [PYTEST ARGS]      (scripts/test.sh runs it after the main suite)
#
# The environment is ${IPUFLOW_TORCH20_VENV:-.venv-torch20}. The first run downloads torch 2.0.1 from
# PyPI, the CUDA build with its nvidia-* wheels (about 4.4 GB; it runs on the CPU); pip caches it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export IPUFLOW_VENV="${IPUFLOW_TORCH20_VENV:-$root/.venv-torch20}"
export IPUFLOW_TORCH="torch==2.0.1"
export PIP_CONSTRAINT="$root/scripts/torch20-constraints.txt"
echo "torch 2.0.1 leg in $IPUFLOW_VENV"
# shellcheck disable=SC1091
source scripts/setup_env.sh transformers
python -m pip install --quiet "pytest>=7"
python - <<'PY'
import numpy, torch, transformers
assert torch.__version__.startswith("2.0.1"), torch.__version__
print(f"torch {torch.__version__}, numpy {numpy.__version__}, transformers {transformers.__version__}")
PY
status=0
# The executor and poptorch tests, quick ones (the slow ones are parity runs the main suite makes).
python -m pytest tests/execution -m "not slow" "$@" || status=$?
# One train/evaluate/predict on both executors, and the poptorch tests of the commands (slow ones too).
python -m pytest tests/execution/test_train_evaluate_predict.py tests/experiment/test_dry_run.py \
    tests/experiment/test_compile_only.py tests/commands/test_cli.py tests/distributed/test_replicas_and_launch.py \
    -k poptorch "$@" || status=$((status ? status : $?))
exit "$status"
