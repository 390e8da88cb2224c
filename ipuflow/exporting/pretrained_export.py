"""Exporting an archived `huggingface` model as a Hugging Face `save_pretrained` directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from ipuflow.config import ConfigurationError
from ipuflow.exporting.export_directory import EXPORT_MARKER, refuse_replacing, write_export_marker
from ipuflow.storage.atomic import write_directory_atomically

__all__ = ["EXPORT_MARKER", "export_pretrained"]


def export_pretrained(archive: Union[str, Path], output: Union[str, Path], weights_file: Optional[Union[str, Path]] = None,
                      overwrite: bool = False) -> Path:
    """Write the archived model's transformers model (weights and config, with `id2label` and
    `label2id`) and its dataset reader's tokenizer into the directory `output`, which
    `transformers.AutoModelFor<Task>.from_pretrained` and `AutoTokenizer.from_pretrained` load.

    The directory appears complete or not at all, with `EXPORT_MARKER`. An existing non-empty one is
    replaced only with `overwrite`, and only if it is an earlier export holding nothing else; a home,
    a filesystem root, the working directory or one above it, and the archive's run directory are
    always refused (see `refuse_replacing`).
    """
    from ipuflow.experiment.archive.archival import load_archive

    target = Path(output)
    refuse_replacing(target, Path(archive), overwrite)
    loaded = load_archive(archive, weights_file=weights_file)
    model = loaded.model
    if not callable(getattr(model, "save_pretrained", None)):
        raise ConfigurationError(
            f"the archived model is a {type(model).__name__}; only models built on transformers (type 'huggingface') "
            f"export as a save_pretrained directory. `ipuflow export` writes ONNX for any model."
        )
    tokenizer = getattr(loaded.dataset_reader, "tokenizer", None)
    target.parent.mkdir(parents=True, exist_ok=True)

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        if callable(getattr(tokenizer, "save_pretrained", None)):
            tokenizer.save_pretrained(str(directory))  # type: ignore[union-attr]
        write_export_marker(directory, str(archive))

    write_directory_atomically(target, write)
    return target
