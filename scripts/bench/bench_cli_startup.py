"""How long each command takes to start and finish a small job, in CPU time, and what it imports.

Usage: python scripts/bench/bench_cli_startup.py [--repeats N] [--root CHECKOUT] [--archive model.tar.gz]

Times, for `--repeats` runs each: `ipuflow --help`, `--version`, `components`, `components model`,
`cache list`, `train configs/quickstart.jsonnet --dry-run` and a one-sentence `predict` on the
quickstart archive (trained for one epoch into a temporary directory first unless `--archive` is
given). CPU time (user + sys of the child) is the figure to compare: wall time scales with the load
of a shared machine, CPU time much less. One more run of each, in-process, reports which of torch,
torch._dynamo, transformers and numpy it imported. `--root` times another checkout's ipuflow
(e.g. the main branch, for a before/after). ipuflow's bytecode is compiled first and
PYTHONDONTWRITEBYTECODE dropped, as for an installed package; OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
WATCHED = ("torch", "torch._dynamo", "transformers", "numpy")
ONE_SENTENCE = {"text": "A fine, moving film."}


def environment(root: Path) -> Dict[str, str]:
    """The children's environment: `root`'s ipuflow first on the path, bytecode kept, one thread."""
    inherited = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return {**inherited, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p),
            "OMP_NUM_THREADS": "1"}


def measured(args: List[str], root: Path, env: Dict[str, str]) -> Tuple[float, float]:
    """CPU time (user + sys) and wall time of `python -m ipuflow ARGS`, in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "ipuflow", *args], cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"ipuflow {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def imported(args: List[str], root: Path, env: Dict[str, str]) -> List[str]:
    """Which of WATCHED one run of the command imports."""
    code = (f"import sys, json\nfrom ipuflow.commands.cli import run\nassert run({args!r}) == 0\n"
            f"print(json.dumps([name for name in {WATCHED!r} if name in sys.modules]), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    return json.loads(result.stderr.strip().splitlines()[-1]) if result.returncode == 0 else ["(failed)"]


def quickstart_archive(root: Path, env: Dict[str, str], scratch: Path) -> Path:
    """The quickstart trained for one epoch in `scratch`; its archive."""
    run_dir = scratch / "quickstart"
    subprocess.run([sys.executable, "-m", "ipuflow", "train", "configs/quickstart.jsonnet", "-s", str(run_dir),
                    "-o", json.dumps({"trainer.num_epochs": 1})], cwd=root, env=env, check=True, capture_output=True)
    return run_dir / "model.tar.gz"


def commands(archive: Path, scratch: Path) -> List[Tuple[str, List[str]]]:
    """Each command's label and arguments."""
    sentence = scratch / "one_sentence.jsonl"
    sentence.write_text(json.dumps(ONE_SENTENCE) + "\n")
    dry_run = scratch / "dry_run"
    return [
        ("--help", ["--help"]),
        ("--version", ["--version"]),
        ("components", ["components"]),
        ("components model", ["components", "model"]),
        ("cache list", ["cache", "list", "--cache-directory", str(scratch / "cache")]),
        ("train quickstart --dry-run", ["train", "configs/quickstart.jsonnet", "-s", str(dry_run), "-f", "--dry-run"]),
        ("predict one sentence", ["predict", str(archive), str(sentence), "--silent", "--output-file",
                                  str(scratch / "predictions.jsonl")]),
    ]


def main() -> None:
    """Print each command's median CPU and wall time and what it imports."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose ipuflow is timed")
    parser.add_argument("--archive", type=Path, help="the archive `predict` runs (default: a fresh one-epoch quickstart)")
    args = parser.parse_args()
    root = args.root.resolve()
    env = environment(root)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "ipuflow")], check=True, env=env)
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        archive = args.archive.resolve() if args.archive else quickstart_archive(root, env, scratch)
        for label, command in commands(archive, scratch):
            runs = [measured(command, root, env) for _ in range(args.repeats)]
            cpu, wall = (statistics.median(values) for values in zip(*runs))
            print(f"ipuflow {label:28s} CPU {cpu:6.3f} s  wall {wall:6.3f} s  (median of {args.repeats}); "
                  f"imports: {', '.join(imported(command, root, env)) or 'none of ' + ', '.join(WATCHED)}")


if __name__ == "__main__":
    main()
