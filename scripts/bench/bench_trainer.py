"""Trainer overhead: GradientDescentTrainer against a hand-written PyTorch loop, side by side.

Both train the small BERT-style classifier of `bert_style.py` on the same random data, read by the
same fixed-shape loader, for one epoch of `--steps` updates per repetition. The trainer runs as
users run it: progress bar, console metrics, TensorBoard and a checkpoint (plus best weights and the
metrics file) at the end of the epoch; the native executor in eager mode on the CPU. Repetitions
alternate the order of the two; medians and the throughput ratio trainer / hand loop are printed
(goal: >= 0.99), for wall time and for process CPU time (steadier on a shared machine), with the
paired per-repetition ratios' spread. `peers.py` is the cross-tool comparison (the hand loop,
Lightning, the HF Trainer and ipuflow, each in its own process, doing the same training); this script
measures the trainer with everything `ipuflow train` adds (progress bar, TensorBoard, checkpoints)
inside one process.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bert_style import BATCH, SEQUENCE, BertStyleClassifier, random_instances  # noqa: E402

import ipuflow.execution.native  # noqa: E402,F401
import ipuflow.training  # noqa: E402,F401
from ipuflow.config import Params  # noqa: E402
from ipuflow.data.loader import FixedShapeDataLoader  # noqa: E402
from ipuflow.training import Trainer  # noqa: E402


def hand_loop_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loader: FixedShapeDataLoader) -> Tuple[float, float]:
    """(wall, CPU) seconds for one epoch of the plain PyTorch loop; the loss is read once at the end."""
    start, cpu = time.perf_counter(), time.process_time()
    model.train()
    loss = None
    for batch in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch)["loss"]
        loss.backward()
        optimizer.step()
    assert loss is not None and torch.isfinite(loss).item()
    return time.perf_counter() - start, time.process_time() - cpu


def trainer_epoch(instances: List[Dict[str, object]], directory: str) -> Tuple[float, float]:
    """(wall, CPU) seconds for `train()` of a one-epoch GradientDescentTrainer (construction not timed)."""
    loader = FixedShapeDataLoader(instances, batch_size=BATCH, max_length=SEQUENCE, shuffle=True, padding="fixed")  # as the hand loop
    trainer = Trainer.from_params(
        Params({
            "num_epochs": 1,
            "optimizer": {"type": "adamw", "lr": 1e-4},
            "executor": {"type": "native", "device": "cpu"},
            "enable_default_callbacks": True,
        }),
        model=BertStyleClassifier(),
        serialization_dir=directory,
        data_loader=loader,
    )
    start, cpu = time.perf_counter(), time.process_time()
    metrics = trainer.train()
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    assert torch.isfinite(torch.tensor(metrics["training_loss"]))
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few steps and repetitions")
    parser.add_argument("--steps", type=int, default=None, help="updates per repetition (default 30, quick 5)")
    parser.add_argument("--repetitions", type=int, default=None, help="repetitions (default 7, quick 2)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    arguments = parser.parse_args()
    steps = arguments.steps or (5 if arguments.quick else 30)
    repetitions = arguments.repetitions or (2 if arguments.quick else 7)
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    logging.basicConfig(level=logging.WARNING)

    torch.manual_seed(0)
    instances = random_instances(steps * BATCH, seed=0)
    hand_model = BertStyleClassifier()
    hand_optimizer = torch.optim.AdamW(hand_model.parameters(), lr=1e-4)
    hand_loader = FixedShapeDataLoader(instances, batch_size=BATCH, max_length=SEQUENCE, shuffle=True)

    with tempfile.TemporaryDirectory() as root:
        # Warm-up (allocator, thread pools, first TensorBoard writer), untimed.
        hand_loop_epoch(hand_model, hand_optimizer, hand_loader)
        trainer_epoch(instances, f"{root}/warmup")
        timings: Dict[str, List[Tuple[float, float]]] = {"hand loop": [], "trainer": []}
        for repetition in range(repetitions):
            order = ["hand loop", "trainer"] if repetition % 2 == 0 else ["trainer", "hand loop"]
            for name in order:
                if name == "hand loop":
                    hand_loader.set_epoch(repetition)
                    timings[name].append(hand_loop_epoch(hand_model, hand_optimizer, hand_loader))
                else:
                    timings[name].append(trainer_epoch(instances, f"{root}/run{repetition}"))

    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads; batch {BATCH}, {steps} updates x {repetitions} repetitions")
    print("ratio = hand loop's time / the trainer's, paired per repetition: median (min..max)")
    print(f"{'variant':<12}{'median s':>10}{'CPU s':>9}{'samples/s':>12}{'ratio (wall)':>26}{'ratio (CPU)':>26}")
    for name, values in timings.items():
        walls, cpus = [wall for wall, _ in values], [cpu for _, cpu in values]
        ratios = {clock: [hand[clock] / mine[clock] for hand, mine in zip(timings["hand loop"], values)] for clock in (0, 1)}
        shown = {clock: f"{statistics.median(r):.3f} ({min(r):.3f}..{max(r):.3f})" for clock, r in ratios.items()}
        print(f"{name:<12}{statistics.median(walls):>10.3f}{statistics.median(cpus):>9.3f}"
              f"{steps * BATCH / statistics.median(walls):>12.1f}{shown[0]:>26}{shown[1]:>26}")


if __name__ == "__main__":
    main()
