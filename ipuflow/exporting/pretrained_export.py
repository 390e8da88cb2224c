"""Exporting an archived model built on transformers (`huggingface`, `transformer_classifier`,
`seq2seq_generator`) as a Hugging Face `save_pretrained` directory with a model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

from ipuflow.config import ConfigurationError
from ipuflow.exporting.export_directory import EXPORT_MARKER, refuse_replacing, write_export_marker
from ipuflow.exporting.model_card import CARD_NAME, RunFacts, model_card
from ipuflow.storage.atomic import write_directory_atomically

__all__ = ["EXPORT_MARKER", "PretrainedExport", "export_pretrained"]

EXPORTABLE_TYPES = "huggingface (every task), transformer_classifier and seq2seq_generator"
"""The built-in model types that `export-pretrained` writes."""


class PretrainedExport(NamedTuple):
    """An export's directory, and the transformers class whose `from_pretrained` loads it."""

    directory: Path
    auto_class: str


def export_pretrained(archive: Union[str, Path], output: Union[str, Path], weights_file: Optional[Union[str, Path]] = None,
                      overwrite: bool = False) -> PretrainedExport:
    """Write the archived model's transformers model (weights and config: `id2label` and `label2id`
    of a labelled task, the generation settings of a seq2seq model), its dataset reader's tokenizer
    and a model card (`README.md`) into the directory `output`, which the model's
    `pretrained_auto_class` (`AutoModelFor<Task>`, `EncoderDecoderModel`) and `AutoTokenizer` load
    with `from_pretrained`. A model with no transformers model inside is refused, naming `ipuflow export`.

    The directory appears complete or not at all, with `EXPORT_MARKER`. An existing non-empty one is
    replaced only with `overwrite`, and only if it is an earlier export holding nothing else; a home,
    a filesystem root, the working directory or one above it, and the archive's run directory are
    always refused (see `refuse_replacing`).
    """
    from ipuflow.experiment.archive.archival import load_archive
    from ipuflow.models.saves_pretrained import SavesPretrained

    target = Path(output)
    refuse_replacing(target, Path(archive), overwrite)
    loaded = load_archive(archive, weights_file=weights_file)
    model = loaded.model
    if not isinstance(model, SavesPretrained):
        raise ConfigurationError(_nothing_to_export(model, loaded.config.as_dict(), archive))
    tokenizer = getattr(loaded.dataset_reader, "tokenizer", None)
    card = model_card(RunFacts.of(Path(archive), loaded, model.pretrained_auto_class, target,
                                  None if weights_file is None else str(weights_file)))
    target.parent.mkdir(parents=True, exist_ok=True)

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        if callable(getattr(tokenizer, "save_pretrained", None)):
            tokenizer.save_pretrained(str(directory))  # type: ignore[union-attr]
        (directory / CARD_NAME).write_text(card, encoding="utf-8")
        write_export_marker(directory, str(archive))

    write_directory_atomically(target, write)
    return PretrainedExport(target, model.pretrained_auto_class)


def _nothing_to_export(model: Any, config: dict, archive: Union[str, Path]) -> str:
    """Why a model without a transformers model inside has no save_pretrained directory, and what to use."""
    model_type = (config.get("model") or {}).get("type", type(model).__name__)
    return (
        f"the archived model is a {model_type} model ({type(model).__name__}), which holds no transformers model, so "
        f"there is nothing for transformers' from_pretrained to load. export-pretrained writes the models built on "
        f"transformers: {EXPORTABLE_TYPES}. `ipuflow export {archive} -o model.onnx` writes this model's forward as "
        "ONNX and checks it against PyTorch (it does so for every built-in model but seq2seq_generator)."
    )
