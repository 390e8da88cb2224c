#!/usr/bin/env bash
# Prints a run directory to train into without deleting anything: BASE if it does not exist or is
# an empty directory, else the first of BASE-2, BASE-3, ... that is.
# Usage: bash scripts/next_run_dir.sh runs/quickstart
set -euo pipefail

free() {  # whether a run may start in $1 without --force (ipuflow's lock file alone does not count)
    if [ ! -e "$1" ]; then return 0; fi
    [ -d "$1" ] && [ -z "$(ls -A "$1" | grep -vx '.ipuflow.lock')" ]
}

base="$1"
candidate="$base"
number=1
until free "$candidate"; do
    number=$((number + 1))
    candidate="$base-$number"
done
echo "$candidate"
