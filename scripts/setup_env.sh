#!/usr/bin/env bash
# Creates (or reuses) a virtual environment and installs ipuflow into it with the given extras.
# Usage: source scripts/setup_env.sh [EXTRAS]     e.g. source scripts/setup_env.sh dev
#
# Torch: when the environment has no torch yet, this installs ${IPUFLOW_TORCH:-torch==2.13.0} first.
# On this project's machines that is a CPU build from local disk; a plain `pip install torch` would
# pull a multi-GB CUDA build. For a GPU, set IPUFLOW_TORCH to the build you want (for example
# IPUFLOW_TORCH="torch==2.13.0" with PIP_INDEX_URL/PIP_EXTRA_INDEX_URL pointing at PyTorch's CUDA
# wheels), or install torch into the environment yourself before running this.
set -euo pipefail
extras="${1:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${IPUFLOW_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install --quiet --upgrade pip
if ! python -c "import torch" >/dev/null 2>&1; then
    python -m pip install --quiet "${IPUFLOW_TORCH:-torch==2.13.0}"
fi
if [ -n "$extras" ]; then
    python -m pip install --quiet -e "$root[$extras]"
else
    python -m pip install --quiet -e "$root"
fi
