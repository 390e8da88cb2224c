"""The question-answering predictor: one answer per question, from all the windows of its context."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ipuflow.predictors.predictor import Predictor, to_jsonable


@Predictor.register("question_answering")
class QuestionAnsweringPredictor(Predictor):
    """Predicts the answer to `{"question": ..., "context": ..., "id": optional}`: with the config's
    `squad_answers` postprocessor, `{"id", "question", "answer", "score"}` per question (the input's
    `id` kept); without one, each window's start and end scores."""

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The postprocessor's prediction, with the input's id when it gave one."""
        prediction = {key: to_jsonable(value) for key, value in outputs.items()}
        if "id" in inputs:
            prediction["id"] = inputs["id"]
        return prediction
