"""HuggingfaceTask: how one kind of `AutoModelFor<Task>` meets ipuflow's batches and outputs."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Mapping, Optional

import torch

from ipuflow.config import ConfigurationError, Registrable
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric


def attention_mask(tokens_mask: torch.Tensor) -> torch.Tensor:
    """The attention mask for a batch's `tokens_mask`, where every row attends to its first
    position: rows that the loader padded onto the batch axis (mask all false) would otherwise give
    NaN attention; real rows attend there anyway (the first special token)."""
    mask = tokens_mask.to(torch.bool)
    return torch.cat([torch.ones_like(mask[:, :1]), mask[:, 1:]], dim=1).long()


class HuggingfaceTask(Registrable):
    """The part of the `huggingface` model that depends on its task, registered by the task's name
    (`token_classification`, `sequence_classification`): which `transformers` auto class builds the
    model, which batch fields go in, and how the model's outputs become ipuflow's (`loss`, `logits`,
    `predictions`), metrics and readable predictions.

    A task with labels (`labelled`) gets `num_labels`, `id2label` and `label2id` from the
    vocabulary's `label_namespace`.
    """

    auto_class: ClassVar[str]
    """The `transformers` auto class, e.g. `AutoModelForTokenClassification`."""
    default_predictor: ClassVar[Optional[str]] = None
    labelled: ClassVar[bool] = True

    def __init__(self, vocab: Vocabulary, label_namespace: str = "labels", label_smoothing: float = 0.0) -> None:
        self.vocab = vocab
        self.label_namespace = label_namespace
        self.label_smoothing = label_smoothing
        self.num_labels = vocab.get_vocab_size(label_namespace) if self.labelled else 0
        if self.labelled and self.num_labels < 1:
            raise ConfigurationError(
                f"the vocabulary's {label_namespace!r} namespace is empty, so there are no labels to predict. Build "
                f"the vocabulary from labelled data (datasets_for_vocab_creation), or fix label_namespace.",
                key="label_namespace",
            )

    def label_names(self) -> Dict[int, str]:
        """Label id → label, from the vocabulary."""
        return {index: self.vocab.get_token_from_index(index, self.label_namespace) for index in range(self.num_labels)}

    def config_settings(self) -> Dict[str, Any]:
        """Settings for the model's `transformers` config (the labels, for a labelled task)."""
        if not self.labelled:
            return {}
        names = self.label_names()
        return {"num_labels": self.num_labels, "id2label": names, "label2id": {label: index for index, label in names.items()}}

    def model_inputs(self, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The keyword arguments of the `transformers` model's forward for `batch`."""
        return {"input_ids": batch["tokens"], "attention_mask": attention_mask(batch["tokens_mask"])}

    def outputs(self, model_outputs: Any, batch: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """ipuflow's outputs: `logits`, `predictions` and, when `batch` has targets, `loss`."""
        raise NotImplementedError

    def prompted_outputs(self, transformer: Any, batch: Mapping[str, torch.Tensor]) -> Optional[Dict[str, torch.Tensor]]:
        """The outputs for a batch of prompts to complete (`predict` of a language model), or None for
        a batch that `model_inputs` and `outputs` handle (every batch, for most tasks)."""
        return None

    def default_metrics(self) -> Dict[str, Metric]:
        """The metrics the model reports unless the config names others."""
        return {}

    def update_metrics(self, metrics: Mapping[str, Metric], outputs: Mapping[str, torch.Tensor],
                       batch: Mapping[str, Any]) -> None:
        """Accumulate `metrics` over a batch (padding rows left out)."""

    def human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """Per-row, JSON-friendly predictions."""
        raise NotImplementedError
