"""The `question_answering` task: extractive QA (`AutoModelForQuestionAnswering`), a start and an end
score per token, with the `squad` reader's windows and the `squad_answers` postprocessor."""

from __future__ import annotations

from typing import Any, Dict, Mapping

import torch

from ipuflow.models.huggingface.task import HuggingfaceTask, attention_mask
from ipuflow.models.span_extraction import span_outputs


@HuggingfaceTask.register("question_answering")
class QuestionAnsweringTask(HuggingfaceTask):
    """Windows of a question and a context (`tokens`, with `type_ids`: question 0, context 1) to
    `start_logits` and `end_logits` per token (padding masked) and, given `span_start` and
    `span_end`, the mean of the start and end cross-entropies as `loss`. The answers, their exact
    match and F1 come from the `squad_answers` postprocessor, which reads the readable outputs."""

    auto_class = "AutoModelForQuestionAnswering"
    default_predictor = "question_answering"
    labelled = False

    def model_inputs(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`input_ids`, `attention_mask` and, when the batch has segments, `token_type_ids`."""
        inputs = {"input_ids": batch["tokens"], "attention_mask": attention_mask(batch["tokens_mask"])}
        if "type_ids" in batch:
            inputs["token_type_ids"] = batch["type_ids"]
        return inputs

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`start_logits`, `end_logits` and, given the gold span, `loss`."""
        return span_outputs(model_outputs.start_logits, model_outputs.end_logits, batch["tokens_mask"],
                            batch.get("span_start"), batch.get("span_end"))

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-row lists of `start_logits` and `end_logits` (what `squad_answers` reads)."""
        return {"start_logits": outputs["start_logits"].detach().float().cpu().tolist(),
                "end_logits": outputs["end_logits"].detach().float().cpu().tolist()}
