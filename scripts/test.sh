#!/usr/bin/env bash
# Install ipuflow with its test dependencies into .venv, lint and type-check it, and run the test suite.
# Extra arguments go to pytest (e.g. `-m "not slow"` for the quick subset).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh dev
echo "ruff check (settings in pyproject.toml)"
ruff check --quiet
echo "mypy (settings in setup.cfg)"
mypy
python -m pytest "$@"
