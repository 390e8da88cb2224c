#!/usr/bin/env bash
# The main job: install ipuflow into .venv and train the quickstart model on the shipped
# Rotten Tomatoes data. The trained archive lands in runs/quickstart/model.tar.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
ipuflow train configs/quickstart.jsonnet -s "${RUN_DIR:-runs/quickstart}" --force "$@"
