"""How long `ipuflow --help` and `ipuflow --version` take, and whether they import torch.

Usage: python scripts/bench/bench_cli_startup.py [--repeats N]
Goal: under 0.5 s on a 2-core machine, without importing torch.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def time_command(args: list, repeats: int) -> float:
    """The median wall time of `python -m ipuflow ARGS` over `repeats` runs, in seconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ipuflow", *args], check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Print the median start-up times and the torch check."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    baseline = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        baseline.append(time.perf_counter() - started)
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from ipuflow.commands.cli import run; run(['--help']); "
                               "print('torch imported:', 'torch' in sys.modules)"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    print(f"python -c pass        median {statistics.median(baseline):.3f} s")
    print(f"ipuflow --help        median {time_command(['--help'], args.repeats):.3f} s")
    print(f"ipuflow --version     median {time_command(['--version'], args.repeats):.3f} s")
    print(probe.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
