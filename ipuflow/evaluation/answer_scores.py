"""Exact match and token F1 of answer strings, with the official SQuAD evaluation's normalisation."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Callable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, punctuation removed, the articles a/an/the removed, whitespace collapsed."""
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """The F1 of the normalised strings' token bags; two empty answers (no answer) agree fully."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_over_golds(score: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    """The best score of `prediction` against any gold answer; no gold answers means "unanswerable",
    which only the empty prediction matches."""
    return max(score(prediction, gold) for gold in (golds or [""]))
