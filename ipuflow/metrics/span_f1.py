"""The `span_f1` metric: entity-level precision, recall and F1 of tag sequences (seqeval's strict mode)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import torch

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.requirements import SEQEVAL, PackageRequirement
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics.metric import Metric
from ipuflow.metrics.summed_over_ranks import summed_over_ranks

SCHEMES = ("IOB2", "IOE2", "IOBES", "BILOU")
OUTSIDE = "O"


def import_seqeval_scheme(name: str) -> Any:
    """The seqeval tagging scheme class called `name`."""
    try:
        from seqeval import scheme
    except ImportError:
        raise ConfigurationError("the span_f1 metric needs the `seqeval` package: pip install seqeval.", key="type") from None
    return getattr(scheme, name)


def entity_type(tag: str) -> Optional[str]:
    """The entity type of a tag such as `B-PER` (None for `O` and tags without a prefix)."""
    prefix, dash, kind = tag.partition("-")
    return kind if dash and len(prefix) == 1 else None


@Metric.register("span_f1")
class SpanF1(Metric):
    """Entity spans found exactly: a predicted entity counts only if a gold entity has the same type,
    start and end, with spans read as seqeval reads them with `mode="strict"` and `scheme` (`IOB2`
    by default; also `IOE2`, `IOBES`, `BILOU`), so an `I-X` after `O` starts no entity.

    Values: `f1` (micro-averaged over entity types), `precision`, `recall`, and `f1_<TYPE>` for each
    type. Predictions and gold tags are tag ids of the vocabulary's `label_namespace` (the vocabulary
    is passed in by the model); a gold position of `IGNORE_LABEL` inside the mask (a tag that the
    vocabulary lacks) reads as `O`. Counts are summed over ranks under torchrun.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (SEQEVAL,)

    def __init__(self, vocab: Optional[Vocabulary] = None, label_namespace: str = "labels", scheme: str = "IOB2",
                 labels: Optional[Sequence[str]] = None) -> None:
        validators.choice("scheme", scheme, SCHEMES)
        if labels is None:
            if vocab is None:
                raise ConfigurationError("span_f1 needs the tag names: the model passes its vocabulary, or give labels.",
                                         key="labels")
            labels = [vocab.get_token_from_index(index, label_namespace) for index in range(vocab.get_vocab_size(label_namespace))]
        self.labels: List[str] = list(labels)
        self.scheme = scheme
        self.types: List[str] = sorted({kind for kind in map(entity_type, self.labels) if kind is not None})
        # Per entity type: [correct, predicted, gold] entity counts.
        self.counts: List[List[int]] = [[0, 0, 0] for _ in self.types]

    def __call__(self, predictions: torch.Tensor, gold: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Accumulate a batch of sentences: `predictions` and `gold` tag ids [sentences, words];
        `mask` marks the words of each sentence."""
        predicted_ids = predictions.detach().cpu().tolist()
        gold_ids = gold.detach().cpu().tolist()
        lengths = (mask.detach().cpu().sum(dim=1).tolist() if mask is not None else [len(row) for row in gold_ids])
        predicted_tags, gold_tags = [], []
        for predicted_row, gold_row, length in zip(predicted_ids, gold_ids, lengths):
            if length:
                predicted_tags.append([self._tag(index) for index in predicted_row[: int(length)]])
                gold_tags.append([self._tag(index) for index in gold_row[: int(length)]])
        if not gold_tags:
            return
        scheme = import_seqeval_scheme(self.scheme)
        from seqeval.scheme import Entities

        found = Entities(predicted_tags, scheme, suffix=False).entities
        truth = Entities(gold_tags, scheme, suffix=False).entities
        position = {kind: index for index, kind in enumerate(self.types)}
        for predicted_entities, gold_entities in zip(found, truth):
            predicted_set = {entity.to_tuple() for entity in predicted_entities}
            gold_set = {entity.to_tuple() for entity in gold_entities}
            for entity, column in ((predicted_set & gold_set, 0), (predicted_set, 1), (gold_set, 2)):
                for _, kind, _, _ in entity:
                    self.counts[position[kind]][column] += 1

    def _tag(self, index: int) -> str:
        return self.labels[index] if 0 <= index < len(self.labels) else OUTSIDE

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        """`f1`, `precision`, `recall` over all entities, and `f1_<TYPE>` per type."""
        counts = summed_over_ranks(torch.tensor(self.counts, dtype=torch.float64).reshape(len(self.types), 3)).cpu()
        correct, predicted, gold = counts.sum(dim=0).tolist() if len(self.types) else (0.0, 0.0, 0.0)
        values = _scores(correct, predicted, gold)
        for kind, row in zip(self.types, counts.tolist()):
            values[f"f1_{kind}"] = _scores(*row)["f1"]
        if reset:
            self.reset()
        return values

    def reset(self) -> None:
        """Forget the counts."""
        self.counts = [[0, 0, 0] for _ in self.types]


def _scores(correct: float, predicted: float, gold: float) -> Dict[str, float]:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"f1": f1, "precision": precision, "recall": recall}
