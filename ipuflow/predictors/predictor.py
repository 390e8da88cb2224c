"""Predictor: JSON inputs to instances, and model outputs to JSON predictions."""

from __future__ import annotations

from typing import Any, Dict, Mapping

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

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The JSON prediction for one input from its human-readable model outputs."""
        return {key: to_jsonable(value) for key, value in outputs.items()}


def to_jsonable(value: Any) -> Any:
    """`value` with tensors and arrays turned into lists, so that `json.dumps` accepts it."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    return value
