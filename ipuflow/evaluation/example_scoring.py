"""Scoring examples rather than instances: a postprocessor's predictions and metrics over a dataset.

A model scores instances (an extractive-QA model scores windows of a context); a `Postprocessor`
turns the outputs of every instance of a dataset into one prediction per example and scores those.
`ExampleScoring` collects the human-readable outputs of one pass over a loader, in instance order
(under torchrun each rank holds its replica's rows, which are gathered on rank 0 so that the
figures equal a single process's), and runs the postprocessor once at the end.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy
import torch

from ipuflow.distributed.collectives import broadcast_from_primary, gather_to_primary
from ipuflow.evaluation.evaluator import evaluate, split_rows
from ipuflow.evaluation.postprocessor import Postprocessor


class ExampleScoring:
    """One dataset's examples scored through `postprocessor`.

    `instances` are the dataset's instances with their metadata fields (what the postprocessor
    regroups by and scores against), in the loader's order; `model` turns raw outputs into
    human-readable per-row values (`make_output_human_readable`).
    """

    def __init__(self, postprocessor: Postprocessor, instances: Sequence[Any], model: Any) -> None:
        self.postprocessor = postprocessor
        self.instances = instances
        self.model = model
        self.predictions: List[Dict[str, Any]] = []

    def collector(self, loader: Any) -> Tuple[Callable[[Mapping[str, Any], Mapping[str, Any]], None], Callable[[], Dict[str, float]]]:
        """(`on_outputs` for `evaluate` over `loader`, `finish`): the first keeps each batch's rows
        with their instance indices; `finish()` returns the postprocessor's metrics (on every rank)
        and leaves the per-example predictions in `predictions` (on rank 0)."""
        indices: Iterator[numpy.ndarray] = iter(loader.instance_indices())
        rows: List[Tuple[int, Dict[str, Any]]] = []

        def on_outputs(outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> None:
            batch_indices = next(indices)
            readable = self.model.make_output_human_readable(dict(outputs))
            batch_rows = split_rows(readable, next(iter(batch.values())).shape[0])
            # Padding rows come after the real ones, so the first len(batch_indices) rows are real.
            rows.extend(zip(batch_indices.tolist(), batch_rows))

        def finish() -> Dict[str, float]:
            gathered = gather_to_primary(rows)
            metrics: Optional[Dict[str, float]] = None
            if gathered is not None:
                by_index = sorted((pair for part in gathered for pair in part), key=lambda pair: pair[0])
                outputs = [row for _, row in by_index]
                instances = list(self.instances)  # read once: a columnar dataset builds each when read
                if len(outputs) != len(instances):
                    raise RuntimeError(f"postprocessing got outputs for {len(outputs)} of {len(instances)} instances")
                self.predictions = self.postprocessor(outputs, instances)
                metrics = self.postprocessor.metrics(self.predictions, instances)
            return dict(broadcast_from_primary(metrics))

        return on_outputs, finish


def evaluate_examples(model: Any, executor: Any, loader: Any, examples: Optional[ExampleScoring] = None,
                      on_outputs: Optional[Callable[[Mapping[str, Any], Mapping[str, Any]], None]] = None) -> Dict[str, float]:
    """`evaluate` under no-grad and, with `examples`, its postprocessor's metrics, which join (and win
    over) the model's. `on_outputs(outputs, batch)` sees each call's outputs as in `evaluate`."""
    collect, finish = examples.collector(loader) if examples is not None else (None, None)

    def each_call(outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> None:
        if collect is not None:
            collect(outputs, batch)
        if on_outputs is not None:
            on_outputs(outputs, batch)

    with torch.no_grad():
        metrics = evaluate(model, executor, loader, on_outputs=each_call if collect or on_outputs else None)
    if finish is not None:
        metrics.update(finish())
    return metrics
