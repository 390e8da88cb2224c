"""Running a predictor over JSON lines in fixed-shape batches: N inputs give N outputs, in order."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.bounded_regex import SlowPattern
from ipuflow.data.loader import DataLoader
from ipuflow.evaluation.evaluator import split_rows
from ipuflow.evaluation.inference import loader_from_config, micro_batch_size_from_config
from ipuflow.evaluation.postprocessor import Postprocessor
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
    outputs. An input may make several instances (the windows of a long context); with a
    `postprocessor` (the config's), each input's instances are post-processed together into the
    input's prediction, otherwise each instance gives one prediction.
    """

    def __init__(self, predictor: Predictor, executor: Any, config: Params, vocab: Any,
                 batch_size: Optional[int] = None, postprocessor: Optional[Postprocessor] = None) -> None:
        self.predictor = predictor
        self.executor = executor
        self.config = config
        self.vocab = vocab
        self.batch_size = batch_size
        self.postprocessor = postprocessor
        self.combined_batch_size = micro_batch_size_from_config(config, batch_size) * executor.batch_size_factor
        self._loader: Optional[DataLoader] = None  # built from the config for the first batch, then reused

    def predict(self, inputs: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Predictions for JSON `inputs` (at most one combined batch is padded)."""
        return self.predict_instances([(item, self.predictor.json_to_instances(item)) for item in inputs])

    def predict_instances(self, inputs: Sequence[Tuple[Mapping[str, Any], Union[Any, List[Any]]]]) -> List[Dict[str, Any]]:
        """Predictions for (JSON input, its instance or instances) pairs, in order."""
        results: List[Dict[str, Any]] = []
        for start in range(0, len(inputs), self.combined_batch_size):
            chunk = [(item, instances if isinstance(instances, list) else [instances])
                     for item, instances in inputs[start:start + self.combined_batch_size]]
            rows = self._rows([instance.index(self.vocab) for _, instances in chunk for instance in instances])
            taken = 0
            for item, instances in chunk:
                own = rows[taken:taken + len(instances)]
                taken += len(instances)
                if self.postprocessor is not None:
                    results.extend(self.predictor.to_json(prediction, item) for prediction in self.postprocessor(own, instances))
                else:
                    results.extend(self.predictor.to_json(row, item) for row in own)
        return results

    def predict_dataset(self, indexed: Sequence[Mapping[str, Any]],
                        instances: Optional[Sequence[Any]] = None) -> List[Dict[str, Any]]:
        """Predictions for every instance of an indexed dataset (such as a columnar one), in order;
        with a postprocessor, one per example of the dataset's `instances` (with their metadata)."""
        rows = self._rows(indexed)
        if self.postprocessor is not None and instances is not None:
            return [self.predictor.to_json(prediction, {}) for prediction in self.postprocessor(rows, list(instances))]
        return [self.predictor.to_json(row, {}) for row in rows]

    def _rows(self, indexed: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """The human-readable outputs of each of `indexed`, in order."""
        if self._loader is None:
            self._loader = loader_from_config(self.config, indexed, self.batch_size,
                                              self.predictor.dataset_reader.batch_transform())
            self.executor.prepare(self._loader)  # later batches have these shapes too
            loader = self._loader
        else:
            loader = self._loader.with_instances(indexed)
        rows: List[Dict[str, Any]] = []
        with torch.no_grad():
            for batch in loader:
                outputs = self.executor(batch).outputs
                readable = self.predictor.model.make_output_human_readable(dict(outputs))
                rows.extend(split_rows(readable, next(iter(batch.values())).shape[0]))
        return rows[: len(indexed)]  # the rest padded the last combined batch


def parse_input_lines(lines: Iterable[str], predictor: Predictor) -> Iterable[Tuple[Any, Any]]:
    """(parsed input, its instances) for each non-blank line, or (BadInputLine, None) for a bad one."""
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
            instances = predictor.json_to_instances(value)
        except SlowPattern:
            raise  # the archive's tokenizer is at fault, not this line
        except (ConfigurationError, KeyError, TypeError, ValueError) as error:
            yield BadInputLine(number, str(error)), None
            continue
        yield value, instances


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
