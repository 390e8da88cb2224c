"""The `huggingface` model: any `transformers` `AutoModelFor<Task>` from a local directory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple, Union

import torch

from ipuflow.config import ConfigurationError, Params, validators
from ipuflow.config.requirements import PackageRequirement, TRANSFORMERS
from ipuflow.data.vocabulary import Vocabulary
from ipuflow.metrics import Metric
from ipuflow.models.huggingface.loading import freeze_parameters, load_auto_model, model_from_config
from ipuflow.models.huggingface.task import HuggingfaceTask
from ipuflow.models.huggingface.transformer_layout import TransformerPipelineLayout
from ipuflow.models.metrics_model import MetricsModel
from ipuflow.models.model import Model

logger = logging.getLogger(__name__)


@Model.register("huggingface")
class HuggingfaceModel(TransformerPipelineLayout, MetricsModel):
    """A `transformers` model for a `task` (a registered `HuggingfaceTask`: `sequence_classification`,
    `token_classification`, `question_answering`, `causal_lm`, `masked_lm`; docs/huggingface.md lists them),
    built by that task's `AutoModelFor<Task>` and returning ipuflow's outputs (`loss`, `logits`,
    `predictions`), so that every executor, metric, archive, `evaluate`, `predict` and
    `export-pretrained` works with it.

    Give either `pretrained_model_name_or_path`, a local directory or `package://<package>/<dir>`
    holding pretrained weights (nothing is downloaded; `from_pretrained_kwargs` go to
    `from_pretrained`, e.g. `{"attn_implementation": "eager"}`), or `config`, a transformers config
    dict with its `model_type`, randomly initialised. A labelled task's `num_labels`, `id2label` and
    `label2id` come from the vocabulary's `label_namespace`.

    `freeze`: regexes of parameter names (as the transformers model names them, e.g.
    `"^bert\\.embeddings\\."`) not to train. `label_smoothing`: as Hugging Face's
    `label_smoothing_factor`. `task_options`: the task's own settings (`token_classification`:
    `label_subtokens`, `"first"` or `"all"`; `causal_lm`: `max_new_tokens` that `predict` generates).
    `metrics` replace the task's default metrics.
    """

    required_packages: ClassVar[Tuple[PackageRequirement, ...]] = (TRANSFORMERS,)

    @classmethod
    def packages_for_config(cls, config: Mapping[str, Any]) -> Tuple[PackageRequirement, ...]:
        """What the `task` the config names needs besides transformers (token classification: seqeval)."""
        task = config.get("task")
        if not isinstance(task, str) or task not in HuggingfaceTask.list_available():
            return ()  # the resolver words a bad task
        return tuple(getattr(HuggingfaceTask.by_name(task), "required_packages", ()))

    def __init__(
        self,
        vocab: Vocabulary,
        task: str,
        pretrained_model_name_or_path: Optional[str] = None,
        config: Optional[Dict[str, Any]] = None,
        from_pretrained_kwargs: Optional[Dict[str, Any]] = None,
        freeze: Optional[List[str]] = None,
        label_namespace: str = "labels",
        label_smoothing: float = 0.0,
        task_options: Optional[Dict[str, Any]] = None,
        metrics: Optional[Dict[str, Metric]] = None,
    ) -> None:
        validators.choice("task", task, HuggingfaceTask.list_available())
        if not isinstance(label_smoothing, (int, float)) or not 0.0 <= label_smoothing < 1.0:
            raise ConfigurationError(key="label_smoothing", expected="a number in [0, 1)", found=label_smoothing)
        if (pretrained_model_name_or_path is None) == (config is None):
            raise ConfigurationError(
                "give exactly one of pretrained_model_name_or_path (a local pretrained model) and config (a "
                "transformers config dict, randomly initialised).",
                key="pretrained_model_name_or_path",
            )
        built_task: HuggingfaceTask = HuggingfaceTask.from_params(
            Params({"type": task, **(task_options or {})}, history="task_options."),
            vocab=vocab, label_namespace=label_namespace, label_smoothing=float(label_smoothing),
        )
        super().__init__(metrics if metrics is not None else built_task.default_metrics())
        self.task = built_task
        self.vocab = vocab
        self.pretrained_model_name_or_path = pretrained_model_name_or_path
        settings = self.task.config_settings()
        self.transformer: Any  # a transformers PreTrainedModel
        if pretrained_model_name_or_path is not None:
            self.transformer = load_auto_model(self.task.auto_class, pretrained_model_name_or_path,
                                               "pretrained_model_name_or_path", settings, from_pretrained_kwargs)
        else:
            self.transformer = model_from_config(self.task.auto_class, config or {}, settings)
        if freeze:
            count = freeze_parameters(self.transformer, freeze)
            logger.info("Froze %d parameter tensors of the %s model", count, task)

    @property
    def default_predictor(self) -> Optional[str]:  # type: ignore[override]
        """The task's predictor (`sequence_tagger`, `text_classifier`)."""
        return self.task.default_predictor

    def forward(self, **batch: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        """The task's outputs for a batch (`loss` when it carries targets)."""
        prompted = self.task.prompted_outputs(self.transformer, batch)
        if prompted is not None:
            return prompted
        model_outputs = self.transformer(**self.task.model_inputs(batch))
        return self.task.outputs(model_outputs, batch)

    def update_metrics(self, outputs: Mapping[str, torch.Tensor], batch: Mapping[str, Any]) -> None:
        """Accumulate the metrics over the batch's real rows."""
        self.task.update_metrics(self.metrics, outputs, batch)

    def make_output_human_readable(self, outputs: Dict[str, torch.Tensor]) -> Dict[str, Any]:
        """The task's readable predictions (tags per word, a label per text)."""
        return self.task.human_readable(outputs)

    def gradient_checkpointing_enable(self) -> None:
        """Recompute the transformer's activations in the backward pass instead of keeping them."""
        if not getattr(self.transformer, "supports_gradient_checkpointing", False):
            raise ConfigurationError(
                f"{type(self.transformer).__name__} does not support gradient checkpointing.", key="gradient_checkpointing"
            )
        if callable(getattr(self.transformer, "activation_checkpointing_enable", None)):  # transformers 5 names it so
            self.transformer.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            self.transformer.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

    @property
    def pretrained_auto_class(self) -> str:
        """The task's transformers auto class, whose `from_pretrained` loads `save_pretrained`'s directory."""
        return self.task.auto_class

    def save_pretrained(self, directory: Union[str, Path]) -> None:
        """Write the transformers model (weights and config, with the label names) into `directory`,
        for `AutoModelFor<Task>.from_pretrained`."""
        self.transformer.save_pretrained(str(directory))
