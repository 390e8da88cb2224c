"""The `token_classification` task: a tag per word (`AutoModelForTokenClassification`), such as
named-entity recognition, from word pieces aligned with words by the `conll2003` reader."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Mapping, Tuple

import torch

from ipuflow.config import ConfigurationError, validators
from ipuflow.config.requirements import SEQEVAL, PackageRequirement
from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric, SpanF1
from ipuflow.models.huggingface.task import HuggingfaceTask
from ipuflow.models.losses import masked_cross_entropy

LABEL_SUBTOKENS = ("first", "all")


def word_starts(piece_words: torch.Tensor) -> torch.Tensor:
    """For `piece_words` [rows, pieces] (each piece's word number from 1, 0 for none), the position
    of each word's first piece [rows, pieces]: column w is word w + 1 (0 past the last word)."""
    rows, pieces = piece_words.shape
    first = first_pieces(piece_words)
    positions = torch.arange(pieces, device=piece_words.device).expand(rows, pieces)
    # Non-first pieces all write column 0, which is dropped.
    starts = torch.zeros(rows, pieces + 1, dtype=torch.long, device=piece_words.device)
    starts = starts.scatter(1, torch.where(first, piece_words.long(), 0), positions)
    return starts[:, 1:]


def first_pieces(piece_words: torch.Tensor) -> torch.Tensor:
    """Whether each piece is the first piece of its word."""
    previous = torch.nn.functional.pad(piece_words, (1, 0))[:, :-1]
    return (piece_words > 0) & (piece_words != previous)


@HuggingfaceTask.register("token_classification")
class TokenClassificationTask(HuggingfaceTask):
    """Word pieces (`tokens`) to a tag of each word (`tags`, one per word, in the label namespace),
    with `piece_words` saying which word each piece belongs to.

    The loss is the cross-entropy over the first piece of each word (`label_subtokens: "first"`,
    the default) or over every piece of it (`"all"`, each with its word's tag). Outputs: `logits`
    per piece, `predictions` (one tag id per word, the first piece's, `IGNORE_LABEL` past the last
    word) and `loss`. The default metric is `span` (`span_f1`: `span_f1`, `span_precision`,
    `span_recall`, `span_f1_<TYPE>`).
    """

    auto_class = "AutoModelForTokenClassification"
    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (SEQEVAL,)  # span_f1 and the tagger's entities
    default_predictor = "sequence_tagger"

    def __init__(self, vocab: Vocabulary, label_namespace: str = "labels", label_smoothing: float = 0.0,
                 label_subtokens: str = "first") -> None:
        super().__init__(vocab, label_namespace, label_smoothing)
        validators.choice("label_subtokens", label_subtokens, LABEL_SUBTOKENS)
        self.label_subtokens = label_subtokens

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`logits` per piece, `predictions` per word and, given `tags`, `loss`."""
        logits = model_outputs.logits
        piece_words = batch.get("piece_words")
        if piece_words is None:
            raise ConfigurationError(
                "the token_classification task needs the batch field 'piece_words' (which word each piece belongs to), "
                "as the conll2003 reader gives it.", key="task",
            )
        starts = word_starts(piece_words)
        words = piece_words.max(dim=1).values
        in_sentence = torch.arange(starts.shape[1], device=starts.device)[None, :] < words[:, None]
        word_logits = logits.gather(1, starts.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        outputs = {"logits": logits, "predictions": torch.where(in_sentence, word_logits.argmax(dim=-1), IGNORE_LABEL)}
        tags = batch.get("tags")
        if tags is not None:
            known = torch.where(batch["tags_mask"], tags, IGNORE_LABEL)
            padded = torch.nn.functional.pad(known, (1, 0), value=IGNORE_LABEL)  # column 0: pieces of no word
            piece_tags = padded.gather(1, piece_words.long().clamp(max=padded.shape[1] - 1))
            trained = first_pieces(piece_words) if self.label_subtokens == "first" else piece_words > 0
            outputs["loss"] = masked_cross_entropy(logits, torch.where(trained, piece_tags, IGNORE_LABEL), self.label_smoothing)
        return outputs

    def default_metrics(self) -> Dict[str, Metric]:
        """`span` (`span_f1` over the vocabulary's tags)."""
        return {"span": SpanF1(vocab=self.vocab, label_namespace=self.label_namespace)}

    def update_metrics(self, metrics: Mapping[str, Metric], outputs: Mapping[str, torch.Tensor],
                       batch: Mapping[str, Any]) -> None:
        """Every metric over the words of each sentence: predicted against gold tag ids."""
        tags = batch.get("tags")
        if tags is None:
            return
        predictions = outputs["predictions"]
        tags = tags.to(predictions.device, non_blocking=True)
        mask = batch["tags_mask"].to(predictions.device, non_blocking=True)
        width = min(tags.shape[1], predictions.shape[1])
        for metric in metrics.values():
            metric(predictions[:, :width], tags[:, :width], mask[:, :width])

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """`tags`: each row's predicted tag per word."""
        names = self.label_names()
        rows: List[List[str]] = [[names[index] for index in row if index != IGNORE_LABEL]
                                 for row in outputs["predictions"].detach().cpu().tolist()]
        return {"tags": rows}
