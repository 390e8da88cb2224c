#!/usr/bin/env bash
# Install ipuflow with its test dependencies into .venv, lint and type-check it, and run the test suite;
# then the torch 2.0.1 leg (scripts/test_torch20.sh: poptorch's torch, in a second environment).
# Extra arguments go to the main suite's pytest (e.g. `-m "not slow"` for the quick subset);
# IPUFLOW_TORCH20_LEG=0 skips the torch 2.0.1 leg.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh dev
echo "ruff check (settings in pyproject.toml)"
ruff check --quiet
echo "mypy (settings in setup.cfg)"
mypy
echo "CoNLL-2003 data for the NER slice test (scripts/fetch_conll2003.py; kept if already there)"
python scripts/fetch_conll2003.py
status=0
python -m pytest "$@" || status=$?
if [ "${IPUFLOW_TORCH20_LEG:-1}" != 0 ]; then
    bash scripts/test_torch20.sh -q || status=$((status ? status : $?))
fi
exit "$status"
