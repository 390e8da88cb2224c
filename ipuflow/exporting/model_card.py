"""The model card (`README.md`, in the Hugging Face Hub's format) of an `export-pretrained` directory:
YAML front matter (library, pipeline tag, tags, the run's scores as a `model-index`), then the
run's metrics, its training time, its data and its config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ipuflow.experiment.archive.archival import Archive
from ipuflow.experiment.serialization_dir import ARCHIVE_NAME, CONFIG_NAME, METRICS_NAME

CARD_NAME = "README.md"

PIPELINE_TAGS = {
    "AutoModelForSequenceClassification": "text-classification",
    "AutoModelForTokenClassification": "token-classification",
    "AutoModelForQuestionAnswering": "question-answering",
    "AutoModelForSeq2SeqLM": "text2text-generation",
    "EncoderDecoderModel": "text2text-generation",
    "AutoModelForCausalLM": "text-generation",
    "AutoModelForMaskedLM": "fill-mask",
}
"""The Hub's pipeline tag for the transformers class that loads an export."""

DATA_KEYS = ("train_data_path", "validation_data_path", "test_data_path")


@dataclass
class RunFacts:
    """What the card tells of the run that trained the exported model."""

    name: str
    auto_class: str
    archive: str
    config: Dict[str, Any]
    full_config: bool
    """Whether `config` is the run's whole config (from its run directory), not the archive's
    inference settings."""
    meta: Dict[str, Any]
    metrics: Optional[Dict[str, Any]]
    """The run's `metrics.json`, None when the archive is not in its run directory."""
    weights_file: Optional[str] = None

    @classmethod
    def of(cls, archive: Path, loaded: Archive, auto_class: str, target: Path, weights_file: Optional[str]) -> "RunFacts":
        """The facts of the run behind `archive` (a run directory, or the `model.tar.gz` in one), as
        `loaded`; its run directory's `config.json` and `metrics.json` when it is in one."""
        directory = archive if archive.is_dir() else archive.parent if archive.name == ARCHIVE_NAME else None
        config = _run_json(directory, CONFIG_NAME)
        return cls(name=target.resolve().name, auto_class=auto_class, archive=str(archive),
                   config=config if config is not None else loaded.config.as_dict(), full_config=config is not None,
                   meta=dict(loaded.meta), metrics=_run_json(directory, METRICS_NAME), weights_file=weights_file)


def _run_json(directory: Optional[Path], name: str) -> Optional[Dict[str, Any]]:
    """The JSON object in the file `name` of the run directory, or None (no directory, no such file,
    or not a JSON object)."""
    try:
        value = json.loads((directory / name).read_text(encoding="utf-8")) if directory is not None else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def model_card(facts: RunFacts) -> str:
    """The text of the card."""
    return "\n".join(["---", _front_matter(facts).rstrip("\n"), "---", "", *_body(facts)]) + "\n"


def _front_matter(facts: RunFacts) -> str:
    """The Hub's metadata, written by huggingface_hub (transformers' own dependency)."""
    from huggingface_hub import EvalResult, ModelCardData

    pipeline_tag = PIPELINE_TAGS.get(facts.auto_class)
    reader = facts.config.get("dataset_reader")
    reader_type = reader.get("type") if isinstance(reader, dict) else reader
    results = []
    for prefix, data_key in (("best_validation_", "validation_data_path"), ("test_", "test_data_path")):
        scores = _scores(facts.metrics or {}, prefix)
        data = facts.config.get(data_key)
        for metric, value in scores.items():
            results.append(EvalResult(
                task_type=pipeline_tag or facts.auto_class, dataset_type=reader_type if isinstance(reader_type, str) else "local",
                dataset_name=data if isinstance(data, str) else data_key, metric_type=metric, metric_value=value,
                metric_name=f"{prefix.replace('_', ' ').strip()} {metric}"))
    tags = ["ipuflow", *([pipeline_tag] if pipeline_tag else [])]
    data = ModelCardData(library_name="transformers", pipeline_tag=pipeline_tag, tags=tags,
                         model_name=facts.name if results else None, eval_results=results or None)
    return data.to_yaml()


def _scores(metrics: Mapping[str, Any], prefix: str) -> Dict[str, float]:
    """The numbers among `metrics` whose key starts with `prefix`, by the rest of the key."""
    return {key[len(prefix):]: value for key, value in metrics.items()
            if key.startswith(prefix) and isinstance(value, (int, float)) and not isinstance(value, bool)}


def _body(facts: RunFacts) -> List[str]:
    lines = [f"# {facts.name}", "",
             f"Trained with ipuflow and exported from the archive `{facts.archive}` by `ipuflow export-pretrained`. "
             "Load it with:", "", "```python",
             f"from transformers import AutoTokenizer, {facts.auto_class}", "",
             f'model = {facts.auto_class}.from_pretrained("{facts.name}")',
             f'tokenizer = AutoTokenizer.from_pretrained("{facts.name}")', "```", ""]
    lines += _results(facts) + _training(facts)
    source = ("The run's config, as ipuflow resolved it:" if facts.full_config else
              "The archive's settings for inference (the run's whole config was not found beside the archive):")
    return lines + ["## Config", "", source, "", "```json",
                    json.dumps(facts.config, indent=2), "```"]


def _results(facts: RunFacts) -> List[str]:
    if facts.metrics is None:
        return ["## Results", "", f"The archive is not in its run directory: no {METRICS_NAME} beside it, so the "
                "run's metrics are unknown here.", ""]
    weights = (f"These weights come from `{facts.weights_file}` (`--weights-file`); the metrics below are the run's, "
               "of its best weights. " if facts.weights_file else "")
    lines = ["## Results", "", f"{weights}The run's `{METRICS_NAME}` (`best_validation_*`: the epoch whose weights "
             "are exported):", "", "| metric | value |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in facts.metrics.items()
              if isinstance(value, (int, float, str)) and not isinstance(value, bool)]
    return lines + [""]


def _training(facts: RunFacts) -> List[str]:
    metrics = facts.metrics or {}
    lines = ["## Training", ""]
    if "training_duration" in metrics:
        lines.append(f"- training time: {metrics['training_duration']}")
    if isinstance(metrics.get("epoch"), int):
        lines.append(f"- epochs: {metrics['epoch'] + 1}")  # `epoch` counts from 0
    for key in DATA_KEYS:
        value = facts.config.get(key)
        if isinstance(value, str):
            lines.append(f"- {key}: `{value}`")
        elif isinstance(value, Mapping):
            lines += [f"- {key} `{name}`: `{path}`" for name, path in value.items()]
    versions = ", ".join(f"{name} {facts.meta[key]}" for name, key in
                         (("ipuflow", "ipuflow_version"), ("torch", "torch_version"), ("git commit", "git_commit"))
                         if key in facts.meta)
    if versions:
        lines.append(f"- trained with {versions}")
    return lines + [""]
