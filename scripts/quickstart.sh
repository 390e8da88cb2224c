#!/usr/bin/env bash
# The main job: install ipuflow into .venv and train the quickstart model on the shipped
# Rotten Tomatoes data. The trained archive lands in runs/quickstart/model.tar.gz; if that directory
# already holds a run, it is kept and this run goes to runs/quickstart-2 (-3, ...), as printed.
# RUN_DIR=DIR trains into DIR instead (refused, as by `ipuflow train`, if DIR already holds a run).
# torch's CPU threads follow the machine's load (the executor's num_threads "auto", logged as "CPU threads:
# N of M cores ..."): on a shared machine that is fewer than one per core. Extra arguments go to `ipuflow
# train`, e.g. -o '{"trainer.executor.num_threads": 2}' to set the count.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
run_dir="${RUN_DIR:-$(bash scripts/next_run_dir.sh runs/quickstart)}"
if [ -z "${RUN_DIR:-}" ] && [ "$run_dir" != "runs/quickstart" ]; then
    echo "runs/quickstart already holds a run (kept); training into $run_dir" >&2
fi
ipuflow train configs/quickstart.jsonnet -s "$run_dir" "$@"
echo "The quickstart run is in $run_dir" >&2
