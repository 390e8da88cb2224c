"""The `squad_answers` postprocessor: the best answer span of each question from its windows."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from ipuflow.config import ConfigurationError, validators
from ipuflow.evaluation.answer_scores import best_over_golds, exact_match, token_f1
from ipuflow.evaluation.postprocessor import Postprocessor

REQUIRED_FIELDS = ("example_id", "offsets", "context")


@Postprocessor.register("squad_answers")
class SquadAnswers(Postprocessor):
    """Picks each question's answer from the start and end scores of all its windows, and scores the
    answers with SQuAD's exact match and F1 (official normalisation; fractions, not percentages).

    Within each window the `n_best_size` highest start and end scores are paired; a pair is a
    candidate when both tokens are in the context, the end is not before the start and the span
    has at most `max_answer_length` tokens; the best candidate over all windows wins (score: start +
    end). With `version_2_with_negative` (SQuAD v2.0), the question is unanswerable when the best
    "no answer" score (the first token's start + end, lowest over the windows) exceeds the best
    candidate's by more than `null_score_diff_threshold`; the empty answer is then predicted.

    Needs the `squad` reader's metadata fields and a model whose outputs hold `start_logits` and
    `end_logits` per token.
    """

    def __init__(self, n_best_size: int = 20, max_answer_length: int = 30, version_2_with_negative: bool = False,
                 null_score_diff_threshold: float = 0.0) -> None:
        validators.positive_int("n_best_size", n_best_size)
        validators.positive_int("max_answer_length", max_answer_length)
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = float(null_score_diff_threshold)

    def metric_names(self) -> List[str]:
        """`exact_match` and `f1`."""
        return ["exact_match", "f1"]

    def __call__(self, outputs: List[Dict[str, Any]], instances: Sequence[Any]) -> List[Dict[str, Any]]:
        """One prediction per question, in the order of first appearance: its id, question, answer,
        score and the gold answers (if known)."""
        questions: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()
        for output, instance in zip(outputs, instances):
            missing = [name for name in REQUIRED_FIELDS if name not in instance]
            if missing or "start_logits" not in output or "end_logits" not in output:
                raise ConfigurationError(
                    f"squad_answers needs the squad reader's fields {', '.join(REQUIRED_FIELDS)} (the instances have "
                    f"{', '.join(instance)}) and a span model's start_logits and end_logits (the outputs have "
                    f"{', '.join(output)}).", key="postprocessor")
            example_id = instance["example_id"].value
            question = questions.setdefault(example_id, {
                "id": example_id, "question": instance["question"].value if "question" in instance else None,
                "context": instance["context"].value,
                "answers": instance["answers"].value if "answers" in instance else None,
                "best": None, "null": None})
            self._search(question, numpy.asarray(output["start_logits"], dtype=float),
                         numpy.asarray(output["end_logits"], dtype=float), instance["offsets"].value)
        return [self._prediction(question) for question in questions.values()]

    def _search(self, question: Dict[str, Any], start: numpy.ndarray, end: numpy.ndarray,
                offsets: Sequence[Optional[Sequence[int]]]) -> None:
        """Update the question's best span and best no-answer score with one window's scores."""
        length = min(len(start), len(offsets))  # scores beyond the window's tokens are padding
        null = float(start[0] + end[0])
        question["null"] = null if question["null"] is None else min(question["null"], null)
        starts = numpy.argsort(start[:length])[::-1][: self.n_best_size]
        ends = numpy.argsort(end[:length])[::-1][: self.n_best_size]
        best: Optional[Tuple[float, int, int]] = question["best"]
        for first in starts.tolist():
            if offsets[first] is None:
                continue
            for last in ends.tolist():
                if offsets[last] is None or last < first or last - first + 1 > self.max_answer_length:
                    continue
                score = float(start[first] + end[last])
                if best is None or score > best[0]:
                    best = (score, offsets[first][0], offsets[last][1])
        question["best"] = best

    def _prediction(self, question: Dict[str, Any]) -> Dict[str, Any]:
        best = question["best"]
        answer, score = "", question["null"]
        if best is not None:
            answer, score = question["context"][best[1]:best[2]], best[0]
            if self.version_2_with_negative and question["null"] - best[0] > self.null_score_diff_threshold:
                answer, score = "", question["null"]
        prediction = {"id": question["id"], "answer": answer, "score": score}
        if question["question"] is not None:
            prediction["question"] = question["question"]
        if question["answers"] is not None:
            prediction["gold"] = question["answers"]
        return prediction

    def metrics(self, predictions: List[Dict[str, Any]], instances: Sequence[Any]) -> Dict[str, float]:
        """`exact_match` and `f1`, each the mean over questions of the best score against any gold
        answer (an unanswerable question's only gold answer is the empty one)."""
        scored = [p for p in predictions if p.get("gold") is not None]
        if not scored:
            return {}
        return {
            "exact_match": sum(best_over_golds(exact_match, p["answer"], p["gold"]) for p in scored) / len(scored),
            "f1": sum(best_over_golds(token_f1, p["answer"], p["gold"]) for p in scored) / len(scored),
        }
