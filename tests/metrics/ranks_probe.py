"""Run by torchrun (2 CPU processes, gloo) from test_metrics_over_ranks.py: each rank joins ipuflow's
group, feeds the metrics its own half of the rows of the same batches, and writes what they report
and what they checkpoint to ``DIR/rank{R}.pt``."""

import os
import sys
from pathlib import Path

import torch

from ipuflow.config import Params
from ipuflow.distributed import process_group
from ipuflow.metrics import Metric

CONFIGS = {"accuracy": {"type": "categorical_accuracy", "top_k": 2}, "f1": {"type": "f1", "average": "macro"},
           "f1_per_class": {"type": "f1", "average": "none"}, "mae": {"type": "mean_absolute_error"}}


def batches():
    """The batches every process sees whole: (scores, gold, mask)."""
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        scores = torch.randn(8, 4, generator=generator)
        gold = torch.randint(0, 4, (8,), generator=generator)
        gold[torch.rand(8, generator=generator) < 0.2] = -100
        yield scores, gold, torch.rand(8, generator=generator) > 0.2


def feed(metrics, rows):
    for scores, gold, mask in batches():
        for name, metric in metrics.items():
            if name == "mae":
                metric(scores[rows, 0], scores[rows, 1], mask=mask[rows])
            else:
                metric(scores[rows], gold[rows], mask=mask[rows])


def main(directory: Path) -> None:
    context = process_group.start("gloo", uses_cuda=False)
    metrics = {name: Metric.from_params(Params(dict(config))) for name, config in CONFIGS.items()}
    feed(metrics, slice(context.rank, None, context.world_size))
    states = {name: metric.state_dict() for name, metric in metrics.items()}
    values = {name: metric.get_metric(reset=True) for name, metric in metrics.items()}
    after_reset = {name: metric.get_metric() for name, metric in metrics.items()}
    torch.save({"values": values, "states": states, "after_reset": after_reset}, directory / f"rank{context.rank}.pt")
    process_group.stop()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(Path(sys.argv[1]))
