"""The sequence-tagging predictor: a tag per word, and the entity spans the tags make."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.readers.conll2003 import json_words
from ipuflow.metrics.span_f1 import SCHEMES, import_seqeval_scheme
from ipuflow.predictors.predictor import Predictor


@Predictor.register("sequence_tagger")
class SequenceTaggerPredictor(Predictor):
    """Tags the words of `{"sentence": "raw text"}` (split on whitespace) or `{"words": [...]}`:
    ``{"words": [...], "tags": [...], "spans": [{"type": "PER", "start": 0, "end": 2, "text": "Peter Blackburn"}]}``,
    spans read from the tags as `span_f1` reads them (`scheme`, `IOB2` by default; `end` exclusive).
    Words past the tokenizer's `max_length` get no tag (`tags` is then shorter than `words`)."""

    def __init__(self, model: Any, dataset_reader: Any, scheme: str = "IOB2") -> None:
        super().__init__(model, dataset_reader)
        validators.choice("scheme", scheme, SCHEMES)
        self.scheme = scheme

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The words, their tags and the entity spans."""
        tags: List[str] = list(outputs["tags"])
        try:
            words = json_words(inputs)
        except ConfigurationError:  # a dataset read by the reader: no JSON input to take the words from
            words = []
        from seqeval.scheme import Entities

        spans = [
            {"type": kind, "start": start, "end": end, **({"text": " ".join(words[start:end])} if words else {})}
            for _, kind, start, end in (entity.to_tuple() for entity in
                                        Entities([tags], import_seqeval_scheme(self.scheme), suffix=False).entities[0])
        ]
        return {**({"words": words} if words else {}), "tags": tags, "spans": spans}
