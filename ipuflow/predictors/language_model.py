"""The language-model predictor: a prompt continued (causal LM) or its mask tokens filled in (masked LM)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ipuflow.config import ConfigurationError
from ipuflow.data.readers import DatasetReader
from ipuflow.models.model import Model
from ipuflow.predictors.predictor import Predictor, to_jsonable


@Predictor.register("language_model")
class LanguageModelPredictor(Predictor):
    """Takes `{"text": ...}` (the reader's `text_key`). For a causal LM: `{"prompt": text,
    "continuation": the generated text, "text": both}`. For a masked LM, the text holds mask tokens
    (`[MASK]`): `{"prompt": text, "filled": the text with each mask replaced by the most likely
    token, "tokens": those tokens}`. Texts are decoded by the reader's tokenizer."""

    def __init__(self, model: Model, dataset_reader: DatasetReader) -> None:
        super().__init__(model, dataset_reader)
        tokenizer = getattr(dataset_reader, "tokenizer", None)
        if not callable(getattr(tokenizer, "decode", None)):
            raise ConfigurationError("the language_model predictor decodes ids with the dataset reader's "
                                     "pretrained_transformer tokenizer; use the language_modeling reader.",
                                     key="dataset_reader")
        self.tokenizer: Any = tokenizer
        self.text_key = getattr(dataset_reader, "text_key", None) or "text"

    def to_json(self, outputs: Dict[str, Any], inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The continuation, or the filled-in text, of the input's prompt."""
        prompt = inputs.get(self.text_key, "")
        prediction: Dict[str, Any] = {"prompt": prompt}
        if "generated_ids" in outputs:
            continuation = self.tokenizer.decode(to_jsonable(outputs["generated_ids"]))
            prediction.update(continuation=continuation, text=f"{prompt} {continuation}".strip())
        elif "predicted_ids" in outputs:
            prediction.update(self._filled(to_jsonable(outputs["prompt_ids"]), to_jsonable(outputs["predicted_ids"])))
        if "id" in inputs:
            prediction["id"] = inputs["id"]
        return prediction

    def _filled(self, prompt_ids: List[int], predicted_ids: List[int]) -> Dict[str, Any]:
        mask = self.tokenizer.mask_token_id
        masked = [position for position, token in enumerate(prompt_ids) if token == mask]
        filled = [predicted_ids[position] if position in masked else token for position, token in enumerate(prompt_ids)]
        return {"filled": self.tokenizer.decode(filled),
                "tokens": self.tokenizer.convert_ids_to_tokens([predicted_ids[position] for position in masked])}
