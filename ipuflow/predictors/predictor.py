"""Predictor: JSON inputs to instances, and model outputs to JSON predictions."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping

from ipuflow.config import Registrable
from ipuflow.data.instance import Instance
from ipuflow.data.readers import DatasetReader
from ipuflow.models.model import Model


class Predictor(Registrable):
    """Converts between the JSON a user sends and the instances and outputs a model works with.

    `ipuflow predict` uses the model's `default_predictor` unless `--predictor` names another.
    `model` and `dataset_reader` are injected from the archive; other arguments come from
    `--predictor-args`.
    """

    def __init__(self, model: Model, dataset_reader: DatasetReader) -> None:
        self.model = model
        self.dataset_reader = dataset_reader

    def json_to_instance(self, inputs: Mapping[str, Any]) -> Instance:
        """The instance for one JSON input (the dataset reader's keys; the label optional)."""
        return self.dataset_reader.instance_from_json(inputs)

    def json_to_instances(self, inputs: Mapping[str, Any]) -> List[Instance]:
        """Every instance of one JSON input: one, or several where the reader splits an example
        (the windows of a long context)."""
        if type(self.dataset_reader).instances_from_json is DatasetReader.instances_from_json:
            return [self.json_to_instance(inputs)]  # which a predictor may override
        return self.dataset_reader.instances_from_json(inputs)

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The JSON prediction for one input from its human-readable model outputs."""
        return {key: to_jsonable(value) for key, value in outputs.items()}


def to_jsonable(value: Any) -> Any:
    """`value` with tensors and arrays turned into lists and NaN or infinite numbers into None, so
    that `json.dumps` writes JSON (bare `NaN` is not JSON, and other readers refuse it)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    return value
