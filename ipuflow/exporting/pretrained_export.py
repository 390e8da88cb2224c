"""Exporting an archived `huggingface` model as a Hugging Face `save_pretrained` directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from ipuflow.config import ConfigurationError
from ipuflow.storage.atomic import write_directory_atomically


def export_pretrained(archive: Union[str, Path], output: Union[str, Path], weights_file: Optional[Union[str, Path]] = None,
                      overwrite: bool = False) -> Path:
    """Write the archived model's transformers model (weights and config, with `id2label` and
    `label2id`) and its dataset reader's tokenizer into the directory `output`, which
    `transformers.AutoModelFor<Task>.from_pretrained` and `AutoTokenizer.from_pretrained` load.

    The directory appears complete or not at all; an existing non-empty one is kept unless `overwrite`.
    """
    from ipuflow.experiment.archive.archival import load_archive

    target = Path(output)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        raise ConfigurationError(f"{target} already exists and is not empty; choose another directory or pass --overwrite.")
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

    write_directory_atomically(target, write)
    return target
