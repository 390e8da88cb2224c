"""The `grouped_vote` postprocessor: one prediction per example from several windows of it."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

import numpy

from ipuflow.config import ConfigurationError
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.evaluation.postprocessor import Postprocessor


@Postprocessor.register("grouped_vote")
class GroupedVote(Postprocessor):
    """Averages the label probabilities of instances that share a group id, then takes the argmax.

    For classifiers fed long documents in windows: each window is an instance carrying the
    document's id in the metadata field `group_field`; the document's prediction is the label with
    the highest mean probability, scored against the document's gold label as `grouped_accuracy`.

    group_field: the instance field holding the group id (a metadata field).
    """

    def __init__(self, group_field: str = "id", vocab: Optional[Vocabulary] = None,
                 label_namespace: str = "labels") -> None:
        self.group_field = group_field
        self.label_names: Optional[Dict[int, str]] = (
            vocab.get_index_to_token_vocabulary(label_namespace) if vocab is not None else None
        )

    def __call__(self, outputs: List[Dict[str, Any]], instances: Sequence[Any]) -> List[Dict[str, Any]]:
        """One prediction per group: its id, label, mean probabilities and gold label if known."""
        groups: "OrderedDict[Any, Dict[str, Any]]" = OrderedDict()
        for output, instance in zip(outputs, instances):
            if self.group_field not in instance:
                raise ConfigurationError(
                    f"instances have no {self.group_field!r} field (they have {', '.join(instance)}).",
                    path="postprocessor.group_field",  # checked while evaluating, outside the resolver
                )
            key = instance[self.group_field].value
            group = groups.setdefault(key, {"probs": [], "gold": None})
            group["probs"].append(numpy.asarray(output["probs"], dtype=float))
            if "label" in instance:
                group["gold"] = instance["label"].label
        predictions = []
        for key, group in groups.items():
            mean = numpy.mean(group["probs"], axis=0)
            best = int(mean.argmax())
            label = self.label_names[best] if self.label_names else best
            predictions.append({self.group_field: key, "label": label, "probs": mean.tolist(), "gold": group["gold"]})
        return predictions

    def metric_names(self) -> List[str]:
        """`grouped_accuracy`."""
        return ["grouped_accuracy"]

    def metrics(self, predictions: List[Dict[str, Any]], instances: Sequence[Any]) -> Dict[str, float]:
        """`grouped_accuracy`: the share of groups whose predicted label is the gold one."""
        scored = [p for p in predictions if p["gold"] is not None]
        if not scored:
            return {}
        correct = sum(str(p["label"]) == str(p["gold"]) for p in scored)
        return {"grouped_accuracy": correct / len(scored)}
