"""The language-modelling tasks: `causal_lm` (`AutoModelForCausalLM`, next-token prediction, which
`predict` continues a prompt with) and `masked_lm` (`AutoModelForMaskedLM`, BERT's masked tokens)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from ipuflow.config import ConfigurationError, validators
from ipuflow.data.collate import IGNORE_LABEL
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.execution.ipu_ops import running_on_ipu
from ipuflow.metrics import Metric, Perplexity
from ipuflow.models.huggingface.task import HuggingfaceTask, attention_mask

PROMPT = "prompt"
"""The batch field of texts given to `predict` (the `language_modeling` reader's)."""
MAX_NEW_TOKENS = 1024


def token_losses(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> Dict[str, torch.Tensor]:
    """`loss` (mean over the labelled tokens, smoothed by `label_smoothing`) and, per row, the summed
    unsmoothed token loss `lm_loss_sum` and the number of labelled tokens `lm_tokens`, which the
    `perplexity` metric reads. Labels equal to `IGNORE_LABEL` are left out."""
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1).long()
    per_token = torch.nn.functional.cross_entropy(flat_logits, flat_labels, reduction="none", ignore_index=IGNORE_LABEL)
    counts = (labels != IGNORE_LABEL).sum(dim=1)
    row_sums = per_token.view(labels.shape).sum(dim=1)
    if label_smoothing:
        smoothed = torch.nn.functional.cross_entropy(flat_logits, flat_labels, reduction="sum", ignore_index=IGNORE_LABEL,
                                                     label_smoothing=label_smoothing)
    else:
        smoothed = row_sums.sum()
    # Divided by a clamped count: a micro-batch of padding rows gives 0, not NaN.
    return {"loss": smoothed / counts.sum().clamp(min=1), "lm_loss_sum": row_sums.detach(), "lm_tokens": counts}


class LanguageModellingTask(HuggingfaceTask):
    """What both language-modelling tasks share: no labels, the `perplexity` metric, and batches
    of blocks (`tokens`) in training and evaluation or of texts to complete (`prompt`) in `predict`."""

    labelled = False
    default_predictor = "language_model"

    def default_metrics(self) -> Dict[str, Metric]:
        """`perplexity`."""
        return {"perplexity": Perplexity()}

    def prompted_outputs(self, transformer: Any, batch: Mapping[str, torch.Tensor]) -> Optional[Dict[str, torch.Tensor]]:
        """For a batch of prompts (`predict`), what `generate` gives; None for a batch of blocks."""
        return self.generate(transformer, batch) if PROMPT in batch else None

    def generate(self, transformer: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The outputs for a batch of prompts."""
        raise NotImplementedError

    def model_inputs(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`input_ids` and `attention_mask` of the blocks (or of the prompts)."""
        field = PROMPT if PROMPT in batch else "tokens"
        return {"input_ids": batch[field], "attention_mask": attention_mask(batch[f"{field}_mask"])}

    def update_metrics(self, metrics: Mapping[str, Metric], outputs: Mapping[str, torch.Tensor],
                       batch: Mapping[str, Any]) -> None:
        """Every metric over the real rows' token losses."""
        if "lm_loss_sum" not in outputs:
            return
        for metric in metrics.values():
            metric(outputs["lm_loss_sum"], outputs["lm_tokens"])


@HuggingfaceTask.register("causal_lm")
class CausalLanguageModellingTask(LanguageModellingTask):
    """Each token of a block predicts the next one (`AutoModelForCausalLM`): outputs `loss` and the
    per-row token losses that `perplexity` reads. In `predict`, each `prompt` is continued greedily by
    at most `max_new_tokens` tokens (`generated`, padded with the model's pad token)."""

    auto_class = "AutoModelForCausalLM"

    def __init__(self, vocab: Vocabulary, label_namespace: str = "labels", label_smoothing: float = 0.0,
                 max_new_tokens: int = 20) -> None:
        super().__init__(vocab, label_namespace, label_smoothing)
        validators.positive_int("max_new_tokens", max_new_tokens)
        if max_new_tokens > MAX_NEW_TOKENS:
            raise ConfigurationError(key="max_new_tokens", expected=f"at most {MAX_NEW_TOKENS}", found=max_new_tokens)
        self.max_new_tokens = max_new_tokens

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`loss`, `lm_loss_sum` and `lm_tokens` of the blocks' next-token predictions."""
        tokens, mask = batch["tokens"], batch["tokens_mask"].to(torch.bool)
        labels = torch.where(mask[:, 1:], tokens[:, 1:], IGNORE_LABEL)
        return token_losses(model_outputs.logits[:, :-1], labels, self.label_smoothing)

    def generate(self, transformer: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`generated`: up to `max_new_tokens` ids continuing each prompt, greedily. A prompt is cut to
        its last tokens where it and the new tokens would not fit the model's positions."""
        if running_on_ipu():
            # generate() is a loop whose length depends on the values it computes: no static graph holds it.
            raise ConfigurationError(
                "causal_lm predict generates with transformers' generate(), a host-driven loop that the poptorch "
                "executor cannot compile; predict on the native executor: -o '{\"trainer.executor\": {\"type\": "
                "\"native\"}}'.", key="task")
        ids, mask = left_aligned(batch[PROMPT], batch[f"{PROMPT}_mask"].to(torch.bool))
        config = transformer.config
        positions = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int):
            room = positions - self.max_new_tokens
            if room < 1:
                raise ConfigurationError(key="task_options.max_new_tokens", found=self.max_new_tokens,
                                         expected=f"fewer than the model's {positions} positions")
            ids, mask = ids[:, -room:], mask[:, -room:]
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        # Every knob that sizes the work is given here, over what the model's config (an archive's copy) says.
        # Rows the loader padded onto the batch axis attend to their last position (not to nothing, which is NaN).
        attend = torch.cat([mask[:, :-1], torch.ones_like(mask[:, -1:])], dim=1).long()
        generated = transformer.generate(input_ids=ids, attention_mask=attend, max_new_tokens=self.max_new_tokens,
                                         do_sample=False, num_beams=1, num_return_sequences=1, pad_token_id=pad)
        new = generated[:, ids.shape[1]:]
        padded = new.new_full((new.shape[0], self.max_new_tokens), pad)
        padded[:, : new.shape[1]] = new
        return {"generated": padded}

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """`generated_ids` per row (the predictor decodes them with the reader's tokenizer)."""
        if "generated" not in outputs:
            return {}
        return {"generated_ids": outputs["generated"].detach().cpu().tolist()}


def left_aligned(ids: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """`ids` and `mask` with each row's tokens moved to the end (padding first), which a decoder-only
    model needs to continue every row from its last token."""
    width = ids.shape[1]
    shift = width - mask.sum(dim=1, keepdim=True)
    source = (torch.arange(width, device=ids.device)[None, :] - shift) % width
    return ids.gather(1, source), mask.gather(1, source)


@HuggingfaceTask.register("masked_lm")
class MaskedLanguageModellingTask(LanguageModellingTask):
    """Predicts the tokens the data loader masked (`AutoModelForMaskedLM`; the `language_modeling`
    reader's `mlm_probability` adds `lm_labels`): outputs `loss` and the per-row token losses that
    `perplexity` reads (over the masked tokens, as run_mlm's). In `predict`, the most likely token
    at every position of each `prompt` (`predictions`), which the predictor reads at the mask tokens."""

    auto_class = "AutoModelForMaskedLM"

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`loss`, `lm_loss_sum` and `lm_tokens` over the masked tokens."""
        labels = batch.get("lm_labels")
        if labels is None:
            raise ConfigurationError(
                "the masked_lm task needs the batch field 'lm_labels' (the masked tokens), which the language_modeling "
                "reader's masking adds: set dataset_reader.mlm_probability (e.g. 0.15).", key="task")
        return token_losses(model_outputs.logits, labels, self.label_smoothing)

    def generate(self, transformer: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """`predictions`: the most likely id at every position of each prompt."""
        logits = transformer(**self.model_inputs(batch)).logits
        return {"predictions": logits.argmax(dim=-1), "prompt": batch[PROMPT]}

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """`prompt_ids` and `predicted_ids` per row."""
        if "predictions" not in outputs:
            return {}
        rows: List[List[int]] = outputs["predictions"].detach().cpu().tolist()
        return {"prompt_ids": outputs["prompt"].detach().cpu().tolist(), "predicted_ids": rows}
