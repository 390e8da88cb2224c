"""Start-up figures: the CPU and wall time of `ipuflow --help`, and the time `ipuflow train` takes to
reach its first step and to end its first validation, with the cumulative import time of each
top-level import.

Usage: python scripts/bench/bench_startup.py [--repeats 5] [--train-repeats 1] [--threads 1]
                                            [--config configs/quickstart.jsonnet]

`--help` runs `--repeats` times (CPU time is user + sys of the child, less sensitive to a loaded
machine than wall time). The train run adds the `startup_probe` callback (scripts/bench/startup_probe.py),
which stops the process after the first validation, with OMP_NUM_THREADS=`--threads` (on a loaded
2-core machine torch's default two threads spin and make the epoch ten times slower); a second run under `python -X importtime` gives
the import breakdown (its own times are inflated by the tracing). ipuflow's bytecode is compiled
first and PYTHONDONTWRITEBYTECODE is dropped, as for an installed package. `uptime` is printed with
the figures: on a shared machine they scale with the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent


def _environment(**extra: str) -> Dict[str, str]:
    paths = [str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")]
    inherited = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**inherited, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def run_measured(command: List[str], env: Dict[str, str]) -> Tuple[float, float, subprocess.CompletedProcess]:
    """Run `command` to the end; its wall time and CPU time (user + sys) and its result."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result


# The libraries whose import the breakdown reports (each where it is first imported, at any depth).
LIBRARIES = ("torch", "numpy", "torch._dynamo", "sympy", "torch.utils.tensorboard", "torchmetrics", "transformers",
             "tokenizers", "scipy", "sklearn", "onnx", "onnxruntime")


def import_breakdown(stderr: str) -> List[Tuple[str, float]]:
    """From `-X importtime` output, in seconds: every import together, the cumulative time of each
    library in LIBRARIES that was imported, and the self time of ipuflow's own modules."""
    first: Dict[str, float] = {}
    total = own = 0.0
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        own_us, cumulative_us, name = line[len("import time:"):].split("|")
        module = name.strip()
        if not name.startswith("  "):  # not imported by another import
            total += int(cumulative_us) / 1e6
        if module.startswith("ipuflow"):
            own += int(own_us) / 1e6
        first.setdefault(module, int(cumulative_us) / 1e6)
    return [("every import", total), *((name, first[name]) for name in LIBRARIES if name in first),
            ("ipuflow's own modules (self time)", own)]


def train_command(config: str, run_dir: str, importtime: bool) -> List[str]:
    overrides = json.dumps({"trainer.callbacks": [{"type": "startup_probe"}]})
    return [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "ipuflow", "train", config,
            "-s", run_dir, "-f", "-o", overrides, "--include-package", "startup_probe"]


def first_epoch(config: str, importtime: bool, threads: int) -> Tuple[Dict, float, subprocess.CompletedProcess]:
    """The probe's report of one train run stopped after its first validation, its CPU time, and the result."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "probe.json"
        env = _environment(IPUFLOW_STARTUP_PROBE=str(report), IPUFLOW_STARTUP_T0=repr(time.time()),
                           OMP_NUM_THREADS=str(threads))
        _, cpu, result = run_measured(train_command(config, str(Path(scratch) / "run"), importtime), env)
        if not report.exists():
            raise SystemExit(f"the train run did not reach its first validation:\n{result.stderr[-3000:]}")
        return json.loads(report.read_text()), cpu, result


def _spread(values: List[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="runs of --help")
    parser.add_argument("--train-repeats", type=int, default=1, help="train runs timed to their first step")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the train runs")
    parser.add_argument("--config", default="configs/quickstart.jsonnet")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    env = _environment()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "ipuflow"), str(BENCH)], check=True, env=env)
    walls, cpus = [], []
    for _ in range(args.repeats):
        wall, cpu, result = run_measured([sys.executable, "-m", "ipuflow", "--help"], env)
        result.check_returncode()
        walls.append(wall)
        cpus.append(cpu)
    print(f"ipuflow --help, {args.repeats} runs: CPU (user + sys) {_spread(cpus)}; wall {_spread(walls)}")

    for index in range(args.train_repeats):
        report, _, _ = first_epoch(args.config, importtime=False, threads=args.threads)
        moments = [(label, report[key]) for label, key in (("first step begins", "first_step_begin"),
                                                            ("first step ends", "first_step_end"),
                                                            ("first validation ends", "first_validation_end"))]
        print(f"ipuflow train {args.config}, run {index + 1}: "
              + "; ".join(f"{label} at {moment['wall_s']:.2f} s wall ({moment['cpu_s']:.2f} s CPU)"
                          for label, moment in moments))
    for label, key in (("first step", "first_step_begin"), ("first validation's end", "first_validation_end")):
        print(f"libraries imported by the {label}:", ", ".join(report[key]["libraries"]))

    report, _, result = first_epoch(args.config, importtime=True, threads=args.threads)
    print(f"under -X importtime: first validation ends at {report['first_validation_end']['wall_s']:.2f} s wall; "
          "cumulative import time of each top-level import (s):")
    for name, seconds in import_breakdown(result.stderr):
        print(f"  {name:40s} {seconds:7.3f}")

if __name__ == "__main__":
    main()
