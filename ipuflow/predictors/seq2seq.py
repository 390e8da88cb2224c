"""The sequence-to-sequence predictor: the text generated from each source."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ipuflow.predictors.predictor import Predictor, to_jsonable


@Predictor.register("seq2seq")
class Seq2SeqPredictor(Predictor):
    """Generates from `{"source": ..., "id": optional}` (the reader's keys): `{"generated": text}`,
    with the input's `id` when it gave one (and `source`/`target` under the config's
    `generation_scores` postprocessor)."""

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The generated text (the model's `generated_text`, or the postprocessor's `generated`)."""
        prediction = {key: to_jsonable(value) for key, value in outputs.items()}
        if "generated_text" in prediction:
            prediction["generated"] = prediction.pop("generated_text")
        if "id" in inputs:
            prediction["id"] = inputs["id"]
        return prediction
