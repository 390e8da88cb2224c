"""Native executor training throughput against a hand-written PyTorch loop, side by side.

The same BERT-style classifier (scripts/bench/bert_style.py: hidden 128, 2 layers, sequence 64,
batch 32, random init), the same batches, the same AdamW updates. Each repetition times `--steps`
updates of: the hand loop; the native executor in eager mode; and (unless --no-compile) the native
executor with compile: true. Repetitions interleave the variants so that machine noise hits all
of them alike; medians and ratios to the hand loop are printed.

    python scripts/bench/bench_executor.py            # full run
    python scripts/bench/bench_executor.py --quick    # a fast smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bert_style import BATCH, BertStyleClassifier, random_batch  # noqa: E402

from ipuflow.execution import NativeExecutor  # noqa: E402


def hand_loop(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[Dict[str, torch.Tensor]], torch.Tensor]:
    """The plain PyTorch training step the executor is measured against."""

    def step(batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch)["loss"]
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def executor_loop(compile_model: bool) -> Callable[[Dict[str, torch.Tensor]], torch.Tensor]:
    model = BertStyleClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    executor = NativeExecutor(model, optimizer, device="cpu", compile=compile_model)
    return lambda batch: executor(batch).loss  # type: ignore[return-value]


def time_steps(step: Callable[[Dict[str, torch.Tensor]], torch.Tensor], batches: List[Dict[str, torch.Tensor]]) -> float:
    """Seconds for one update per batch; the loss is read once at the end (as a logger would)."""
    start = time.perf_counter()
    loss = None
    for batch in batches:
        loss = step(batch)
    assert loss is not None and torch.isfinite(loss).item()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few steps and repetitions")
    parser.add_argument("--steps", type=int, default=None, help="updates per repetition (default 30, quick 5)")
    parser.add_argument("--repetitions", type=int, default=None, help="repetitions (default 7, quick 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed updates first (default 5; compile warms up here)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    arguments = parser.parse_args()
    steps = arguments.steps or (5 if arguments.quick else 30)
    repetitions = arguments.repetitions or (2 if arguments.quick else 7)
    warmup = arguments.warmup if arguments.warmup is not None else (2 if arguments.quick else 5)
    if arguments.threads:
        torch.set_num_threads(arguments.threads)

    torch.manual_seed(0)
    batches = [random_batch(BATCH, seed=index) for index in range(steps)]
    reference_model = BertStyleClassifier()
    variants: Dict[str, Callable[[Dict[str, torch.Tensor]], torch.Tensor]] = {
        "hand loop": hand_loop(reference_model, torch.optim.AdamW(reference_model.parameters(), lr=1e-4)),
        "executor eager": executor_loop(False),
    }
    if not arguments.no_compile:
        variants["executor compile"] = executor_loop(True)

    for name, step in variants.items():
        start = time.perf_counter()
        time_steps(step, batches[:1] * warmup)
        print(f"warm-up {name}: {time.perf_counter() - start:.1f} s for {warmup} steps", flush=True)

    timings: Dict[str, List[float]] = {name: [] for name in variants}
    for repetition in range(repetitions):
        order = list(variants) if repetition % 2 == 0 else list(reversed(variants))
        for name in order:
            timings[name].append(time_steps(variants[name], batches))

    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads; batch {BATCH}, {steps} updates x {repetitions} repetitions")
    hand = statistics.median(timings["hand loop"])
    print(f"{'variant':<18}{'median s':>10}{'samples/s':>12}{'vs hand loop':>14}   all runs (s)")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:<18}{median:>10.3f}{steps * BATCH / median:>12.1f}{hand / median:>13.3f}x   {' '.join(f'{v:.3f}' for v in values)}")


if __name__ == "__main__":
    main()
