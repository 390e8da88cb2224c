"""The `tensor_classification` reader: JSON lines of a numeric feature vector and a label."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Union

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.fields import Field, LabelField, TensorField
from ipuflow.data.instance import Instance
from ipuflow.data.readers.dataset_reader import DatasetReader
from ipuflow.data.readers.json_lines import read_json_lines, require_key
from ipuflow.data.readers.labels import LabelPresence, check_label

logger = logging.getLogger(__name__)


@DatasetReader.register("tensor_classification")
class TensorClassificationReader(DatasetReader):
    """JSON lines such as `{"features": [0.0, 0.25, ...], "label": 3}`.

    Every vector must have the same length (`feature_dim`, or the first record's length) and
    finite values. Instances have fields `features` and, if labelled, `label`.
    """

    def __init__(
        self,
        features_key: str = "features",
        label_key: str = "label",
        feature_dim: Optional[int] = None,
        max_instances: Optional[int] = None,
        label_namespace: str = "labels",
        **kwargs: Any,
    ) -> None:
        super().__init__(max_instances=max_instances, **kwargs)
        validators.positive_int("feature_dim", feature_dim, optional=True)
        self.features_key = features_key
        self.label_key = label_key
        self.feature_dim = feature_dim
        self.label_namespace = label_namespace

    def _read(self, path: Path) -> Iterator[Instance]:
        labels = LabelPresence(path, self.label_key)
        expected_dim = self.feature_dim
        for line_number, record in read_json_lines(path):
            where = f"{path}:{line_number}"
            labels.check(self.label_key in record, line_number)
            instance = self._from_record(record, where, expected_dim)
            if expected_dim is None:
                expected_dim = len(instance.fields["features"])  # type: ignore[arg-type]
            yield instance
        if labels.first is False:
            logger.warning("%s has no %r key in any record: its instances have no labels.", path, self.label_key)

    def _from_record(self, record: Mapping[str, Any], where: str, expected_dim: Optional[int]) -> Instance:
        values = require_key(dict(record), self.features_key, where)
        if not isinstance(values, list) or not all(
            isinstance(value, (int, float)) and not isinstance(value, bool) for value in values
        ):
            raise ConfigurationError(f"{where}: {self.features_key!r} must be a list of numbers, found {_short(values)}.")
        if not values:
            raise ConfigurationError(f"{where}: {self.features_key!r} is empty.")
        if expected_dim is not None and len(values) != expected_dim:
            source = "feature_dim" if self.feature_dim is not None else "the first record"
            raise ConfigurationError(
                f"{where}: {self.features_key!r} has {len(values)} values, but {source} has {expected_dim}."
            )
        if not all(math.isfinite(value) for value in values):
            raise ConfigurationError(f"{where}: {self.features_key!r} holds a NaN or infinite value.")
        label = check_label(record[self.label_key], where, self.label_key) if self.label_key in record else None
        return self.text_to_instance(values, label)

    def text_to_instance(self, features: Sequence[float], label: Union[str, int, None] = None) -> Instance:  # type: ignore[override]
        """An instance of a feature vector and, if given, its `label`."""
        fields: Dict[str, Field] = {"features": TensorField(features)}
        if label is not None:
            fields["label"] = LabelField(label, namespace=self.label_namespace)
        return Instance(fields)

    def instance_from_json(self, obj: Mapping[str, Any]) -> Instance:
        """An instance from `{features_key: [...], label_key: ...}` (the label optional)."""
        return self._from_record(obj, "JSON input", self.feature_dim)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
