"""The classification predictor: the label, every label's probability, and the top k."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ipuflow.config import validators
from ipuflow.data.readers import DatasetReader
from ipuflow.models.model import Model
from ipuflow.predictors.predictor import Predictor


@Predictor.register("text_classifier")
@Predictor.register("tensor_classifier")
class ClassifierPredictor(Predictor):
    """Predicts a label: ``{"label": ..., "probs": {label: p, ...}, "top_k": [[label, p], ...]}``.

    top_k: how many of the most probable labels to list, most probable first.
    """

    def __init__(self, model: Model, dataset_reader: DatasetReader, top_k: int = 3) -> None:
        super().__init__(model, dataset_reader)
        validators.positive_int("top_k", top_k)
        self.top_k = top_k
        self.labels: Optional[List[str]] = None
        vocab = getattr(model, "vocab", None)
        if vocab is not None and "labels" in vocab.get_namespaces():
            index_to_label = vocab.get_index_to_token_vocabulary("labels")
            self.labels = [index_to_label[i] for i in range(len(index_to_label))]

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The label, the probability of each label, and the `top_k` most probable labels."""
        probs: Sequence[float] = [float(p) for p in _as_list(outputs["probs"])]
        names = self.labels if self.labels is not None and len(self.labels) == len(probs) else [str(i) for i in range(len(probs))]
        ranked = sorted(zip(names, probs), key=lambda pair: pair[1], reverse=True)
        label = outputs.get("label", ranked[0][0])
        return {
            "label": label,
            "probs": dict(zip(names, probs)),
            "top_k": [[name, prob] for name, prob in ranked[: self.top_k]],
        }


def _as_list(value: Any) -> List[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)
