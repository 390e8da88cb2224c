"""Data-parallel scaling of the native executor under torchrun: one process against N, side by side.

The BERT-style classifier of scripts/bench/bert_style.py (hidden 128, 2 layers, sequence 64, AdamW)
trains on random batches with the native executor, each process running one replica of
`--micro-batch` rows per optimizer update (weak scaling: N processes make an update of N times the
rows). One invocation measures, in turn:

* ``1 process``: the executor alone, no process group (the single-process baseline);
* ``N processes``: `torchrun --nproc_per_node N`, the executor in its replica group (DDP, gradients
  reduced once per update), with the time of one all-reduce of every gradient (in DDP's 25 MB
  buckets) measured separately as the per-update communication time.

Scaling efficiency = N-process throughput / (N × 1-process throughput). With `--backend gloo` (the
default) every process runs on the CPU; on a CPU the processes share the machine's cores, so each
gets `--threads` threads (default: cores / N) and the baseline is measured both with that many
threads and with all cores. With `--backend nccl` each process takes one GPU (``cuda:LOCAL_RANK``)
and the baseline runs on one GPU; with one GPU only the 1-GPU figures are reported, since two
processes sharing one GPU say nothing about scaling.

    python scripts/bench/bench_distributed.py --quick                 # CPU, 2 processes, gloo
    python scripts/bench/bench_distributed.py --backend nccl          # every visible GPU
    python scripts/bench/bench_distributed.py --backend nccl --nproc 4
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
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

BUCKET_BYTES = 25 * 1024 * 1024  # DDP's default bucket size


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def worker(arguments: argparse.Namespace) -> None:
    """One process's measurement (inside torchrun when WORLD_SIZE is set); rank 0 writes the result."""
    import torch

    from bert_style import BertStyleClassifier, random_batch
    from ipuflow.distributed import process_group
    from ipuflow.execution import NativeExecutor

    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    context = process_group.start(arguments.backend, arguments.backend == "nccl") if process_group.launched_by_torchrun() else None
    world = context.world_size if context is not None else 1
    device = "cuda" if arguments.backend == "nccl" else "cpu"
    torch.manual_seed(0)
    model = BertStyleClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    executor = NativeExecutor(model, optimizer, device=device, replication_factor=world)
    rank = context.rank if context is not None else 0
    batches = [random_batch(arguments.micro_batch, seed=1000 * rank + index) for index in range(arguments.steps)]

    for batch in batches[: arguments.warmup]:
        executor(batch)
    _synchronize(executor.device)
    seconds: List[float] = []
    for _ in range(arguments.repetitions):
        if context is not None:
            torch.distributed.barrier()
        start = time.perf_counter()
        loss = None
        for batch in batches:
            loss = executor(batch).loss
        assert loss is not None
        loss.item()  # as a logger would read it; also waits for the device
        _synchronize(executor.device)
        seconds.append((time.perf_counter() - start) / len(batches))

    communication: Optional[float] = None
    if context is not None:
        gradients = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
        buffer = torch.zeros(gradients, dtype=torch.float32, device=executor.device)
        bucket = max(1, BUCKET_BYTES // 4)
        timings = []
        for _ in range(arguments.repetitions * 5):
            torch.distributed.barrier()
            _synchronize(executor.device)
            start = time.perf_counter()
            for offset in range(0, gradients, bucket):
                torch.distributed.all_reduce(buffer[offset: offset + bucket])
            _synchronize(executor.device)
            timings.append(time.perf_counter() - start)
        communication = statistics.median(timings)
    if rank == 0:
        per_update = statistics.median(seconds)
        result = {"processes": world, "threads": torch.get_num_threads(), "device": str(executor.device),
                  "seconds_per_update": per_update, "samples_per_update": arguments.micro_batch * world,
                  "samples_per_second": arguments.micro_batch * world / per_update,
                  "allreduce_seconds": communication,
                  "gradient_megabytes": sum(p.numel() for p in model.parameters()) * 4 / 2**20}
        Path(arguments.result).write_text(json.dumps(result))
    if context is not None:
        process_group.stop()


def _run(arguments: argparse.Namespace, processes: int, threads: Optional[int]) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        result = Path(scratch) / "result.json"
        worker_arguments = [str(Path(__file__).resolve()), "--worker", "--result", str(result), "--backend", arguments.backend,
                            "--steps", str(arguments.steps), "--warmup", str(arguments.warmup),
                            "--repetitions", str(arguments.repetitions), "--micro-batch", str(arguments.micro_batch)]
        if threads:
            worker_arguments += ["--threads", str(threads)]
        if processes == 1:
            command = [sys.executable, *worker_arguments]
        else:
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                       *worker_arguments]
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        if threads:
            environment["OMP_NUM_THREADS"] = str(threads)
        done = subprocess.run(command, env=environment, capture_output=True, text=True)
        if done.returncode != 0 or not result.is_file():
            raise SystemExit(f"The {processes}-process measurement failed:\n{done.stderr[-4000:]}")
        return json.loads(result.read_text())


def _gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:  # pragma: no cover
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo", help="gloo: CPU processes; nccl: one GPU each")
    parser.add_argument("--nproc", type=int, default=None, help="processes (default: 2 for gloo, every GPU for nccl)")
    parser.add_argument("--micro-batch", type=int, default=32, help="rows per replica per update (default 32)")
    parser.add_argument("--steps", type=int, default=None, help="timed updates per repetition (default 20, quick 5)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed updates first (default 5, quick 2)")
    parser.add_argument("--repetitions", type=int, default=None, help="repetitions, medians reported (default 5, quick 2)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads per process (gloo; default cores / nproc)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    arguments.steps = arguments.steps or (5 if arguments.quick else 20)
    arguments.warmup = arguments.warmup if arguments.warmup is not None else (2 if arguments.quick else 5)
    arguments.repetitions = arguments.repetitions or (2 if arguments.quick else 5)
    if arguments.worker:
        worker(arguments)
        return

    cores = os.cpu_count() or 1
    rows: List[Dict[str, Any]] = []
    notes: List[str] = []
    if arguments.backend == "nccl":
        gpus = _gpus()
        if gpus == 0:
            raise SystemExit("--backend nccl needs CUDA devices; torch sees none.")
        processes = arguments.nproc or gpus
        if processes > gpus:
            raise SystemExit(f"--nproc {processes}: only {gpus} GPUs are visible, and each process needs its own.")
        rows.append({"variant": "1 process, 1 GPU", **_run(arguments, 1, arguments.threads)})
        if processes == 1:
            notes.append("Only one GPU is visible: the 1-GPU figures are reported alone. Two processes on one GPU "
                         "would share its compute, which says nothing about scaling across GPUs.")
        else:
            rows.append({"variant": f"{processes} processes, 1 GPU each (nccl)", **_run(arguments, processes, arguments.threads)})
    else:
        processes = arguments.nproc or 2
        threads = arguments.threads or max(1, cores // processes)
        rows.append({"variant": f"1 process, {threads} thread(s)", **_run(arguments, 1, threads)})
        if threads != cores:
            rows.append({"variant": f"1 process, {cores} threads (all cores)", **_run(arguments, 1, cores)})
        rows.append({"variant": f"{processes} processes (gloo), {threads} thread(s) each", **_run(arguments, processes, threads)})
        notes.append(f"CPU: {cores} cores shared by every process of a variant. Efficiency compares with one process of "
                     "the same threads; 'vs all cores' says what the N processes give over one process using the "
                     "whole machine.")

    base = rows[0]["samples_per_second"]
    whole_machine = rows[1]["samples_per_second"] if arguments.backend == "gloo" and len(rows) == 3 else base
    print(f"Native executor, BERT-style model ({rows[0]['gradient_megabytes']:.1f} MB of fp32 gradients), micro-batch "
          f"{arguments.micro_batch} per replica, {arguments.steps} updates x {arguments.repetitions} repetitions (medians)")
    header = ("variant", "samples/update", "s/update", "samples/s", "all-reduce/update", "efficiency", "vs all cores")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        n = row["processes"]
        efficiency = row["samples_per_second"] / (n * base) if n > 1 else None
        versus = row["samples_per_second"] / whole_machine if n > 1 and arguments.backend == "gloo" else None
        communication = f"{row['allreduce_seconds'] * 1000:.2f} ms" if row["allreduce_seconds"] is not None else "-"
        print(f"| {row['variant']} | {row['samples_per_update']} | {row['seconds_per_update']:.4f} | "
              f"{row['samples_per_second']:.1f} | {communication} | "
              f"{'-' if efficiency is None else f'{efficiency:.2f}'} | {'-' if versus is None else f'{versus:.2f}x'} |")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
