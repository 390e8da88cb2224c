"""Running a predictor over JSON lines in fixed-shape batches: N inputs give N outputs, in order."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.loader import DataLoader
from ipuflow.evaluation.evaluator import split_rows
from ipuflow.evaluation.inference import loader_from_config, micro_batch_size_from_config
from ipuflow.predictors.predictor import Predictor

logger = logging.getLogger(__name__)


class BadInputLine(Exception):
    """An input line that is not a JSON object the dataset reader accepts."""

    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"input line {line_number}: {reason}")
        self.line_number = line_number


class BatchPredictor:
    """Feeds parsed inputs to an inference executor one combined batch at a time.

    The last, partial batch is padded to the compiled shape and the padding dropped from the
    outputs.
    """

    def __init__(self, predictor: Predictor, executor: Any, config: Params, vocab: Any,
                 batch_size: Optional[int] = None) -> None:
        self.predictor = predictor
        self.executor = executor
        self.config = config
        self.vocab = vocab
        self.batch_size = batch_size
        self.combined_batch_size = micro_batch_size_from_config(config, batch_size) * executor.batch_size_factor
        self._loader: Optional[DataLoader] = None  # built from the config for the first batch, then reused

    def predict(self, inputs: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Predictions for JSON `inputs` (at most one combined batch is padded)."""
        return self.predict_instances([(item, self.predictor.json_to_instance(item)) for item in inputs])

    def predict_instances(self, inputs: List[Tuple[Mapping[str, Any], Any]]) -> List[Dict[str, Any]]:
        """Predictions for (JSON input, instance) pairs, in order."""
        results: List[Dict[str, Any]] = []
        for start in range(0, len(inputs), self.combined_batch_size):
            chunk = inputs[start:start + self.combined_batch_size]
            indexed = [instance.index(self.vocab) for _, instance in chunk]
            results.extend(self._run(indexed, [item for item, _ in chunk]))
        return results

    def predict_dataset(self, indexed: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Predictions for every instance of an indexed dataset (such as a columnar one), in order."""
        return self._run(indexed, [{}] * len(indexed))

    def _run(self, indexed: Sequence[Mapping[str, Any]], chunk: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        if self._loader is None:
            self._loader = loader_from_config(self.config, indexed, self.batch_size)
            self.executor.prepare(self._loader)  # later batches have these shapes too
            loader = self._loader
        else:
            loader = self._loader.with_instances(indexed)
        predictions: List[Dict[str, Any]] = []
        with torch.no_grad():
            for batch in loader:
                outputs = self.executor(batch).outputs
                readable = self.predictor.model.make_output_human_readable(dict(outputs))
                rows = split_rows(readable, next(iter(batch.values())).shape[0])
                taken = len(predictions)
                for row, item in zip(rows, chunk[taken:]):
                    predictions.append(self.predictor.to_json(row, item))
        return predictions


def parse_input_lines(lines: Iterable[str], predictor: Predictor) -> Iterable[Tuple[Any, Any]]:
    """(parsed input, its instance) for each non-blank line, or (BadInputLine, None) for a bad one."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            yield BadInputLine(number, f"not valid JSON ({error.msg} at column {error.colno})"), None
            continue
        if not isinstance(value, dict):
            yield BadInputLine(number, f"expected a JSON object, found {type(value).__name__}"), None
            continue
        try:
            instance = predictor.json_to_instance(value)
        except (ConfigurationError, KeyError, TypeError, ValueError) as error:
            yield BadInputLine(number, str(error)), None
            continue
        yield value, instance


def predict_lines(batch_predictor: BatchPredictor, lines: Iterable[str], write: Callable[[Dict[str, Any]], None],
                  skip_bad_lines: bool = False) -> int:
    """Predict every input line and `write` each prediction in order; return how many were written.

    A bad line stops the run after the predictions for the lines before it are written, unless
    `skip_bad_lines`, which logs it and goes on.
    """
    pending: List[Tuple[Mapping[str, Any], Any]] = []
    written = 0

    def flush() -> None:
        nonlocal written
        for prediction in batch_predictor.predict_instances(pending):
            write(prediction)
            written += 1
        pending.clear()

    for item, instance in parse_input_lines(lines, batch_predictor.predictor):
        if isinstance(item, BadInputLine):
            if skip_bad_lines:
                logger.warning("Skipping %s", item)
                continue
            flush()
            raise item
        pending.append((item, instance))
        if len(pending) == batch_predictor.combined_batch_size:
            flush()
    flush()
    return written
