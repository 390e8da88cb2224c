"""Model archives: `model.tar.gz` with the config, safetensors weights, vocabulary and metadata.

Archives hold no pickles, so loading one never runs code from it, and extraction refuses members
that would land outside the target directory.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.params import with_overrides
from ipuflow.storage import ChecksumMismatch, file_sha256, verify_sha256, write_atomically
from ipuflow.experiment.serialization_dir import (
    ARCHIVE_NAME, BEST_WEIGHTS_NAME, CONFIG_NAME, META_NAME, VOCABULARY_DIR,
)

WEIGHTS_NAME = "weights.safetensors"
# The SHA-256 of the weights, in `sha256sum` format, checked when the archive is loaded.
WEIGHTS_CHECKSUM_NAME = "weights.safetensors.sha256"


@dataclass
class Archive:
    """A loaded archive: the model (weights loaded, in eval mode), its config and its readers."""

    model: Any
    config: Params
    vocab: Any
    dataset_reader: Any
    validation_dataset_reader: Any
    meta: Dict[str, Any]


def archive_model(serialization_dir: Union[str, Path], weights: Optional[Union[str, Path]] = None,
                  archive_path: Optional[Union[str, Path]] = None) -> Path:
    """Write `model.tar.gz` from a serialization directory's config, vocabulary and best weights."""
    directory = Path(serialization_dir)
    weights_path = Path(weights) if weights is not None else directory / BEST_WEIGHTS_NAME
    if not weights_path.is_file():
        raise ConfigurationError(f"Cannot archive {directory}: no weights file {weights_path}.")
    target = Path(archive_path) if archive_path is not None else directory / ARCHIVE_NAME
    checksum = f"{file_sha256(weights_path)}  {WEIGHTS_NAME}\n".encode("ascii")

    def write(temporary: str) -> None:
        with tarfile.open(temporary, "w:gz") as archive:
            archive.add(directory / CONFIG_NAME, arcname=CONFIG_NAME)
            archive.add(weights_path, arcname=WEIGHTS_NAME)
            checksum_member = tarfile.TarInfo(WEIGHTS_CHECKSUM_NAME)
            checksum_member.size = len(checksum)
            archive.addfile(checksum_member, io.BytesIO(checksum))
            if (directory / VOCABULARY_DIR).is_dir():
                archive.add(directory / VOCABULARY_DIR, arcname=VOCABULARY_DIR)
            if (directory / META_NAME).is_file():
                archive.add(directory / META_NAME, arcname=META_NAME)

    write_atomically(target, write)
    return target


def extract_archive(archive_file: Union[str, Path], target: Union[str, Path]) -> None:
    """Extract regular files and directories only, refusing any member that would land outside `target`."""
    target = Path(target).resolve()
    with tarfile.open(archive_file, "r:gz") as archive:
        members = archive.getmembers()
        for member in members:
            destination = (target / member.name).resolve()
            if not (member.isfile() or member.isdir()) or os.path.commonpath([target, destination]) != str(target):
                raise ConfigurationError(
                    f"{archive_file}: refusing to extract {member.name!r}: it is not a plain file or directory "
                    f"inside the archive's folder."
                )
        for member in members:
            archive.extract(member, target, set_attrs=False, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def load_archive(path: Union[str, Path], overrides: Union[str, Dict[str, Any]] = "",
                 weights_file: Optional[Union[str, Path]] = None) -> Archive:
    """Rebuild the model from `model.tar.gz` or from a serialization directory, with its weights.

    `overrides` edits the archived config (e.g. the reader); `weights_file` replaces the weights.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigurationError(f"Archive {path} does not exist.")
    if path.is_dir():
        archived = path / ARCHIVE_NAME
        if archived.is_file():
            return _load_from_directory_archive(archived, overrides, weights_file)
        weights = Path(weights_file) if weights_file else path / BEST_WEIGHTS_NAME
        return _load_from_directory(path, weights, overrides)
    return _load_from_directory_archive(path, overrides, weights_file)


def _load_from_directory_archive(archive_file: Path, overrides: Union[str, Dict[str, Any]],
                                 weights_file: Optional[Union[str, Path]]) -> Archive:
    with tempfile.TemporaryDirectory(prefix="ipuflow-archive-") as folder:
        extract_archive(archive_file, folder)
        weights = Path(weights_file) if weights_file else Path(folder) / WEIGHTS_NAME
        return _load_from_directory(Path(folder), weights, overrides)


def _verify_archived_weights(directory: Path, weights: Path) -> None:
    """Check the archive's weights against the checksum archived with them (if any)."""
    recorded = directory / WEIGHTS_CHECKSUM_NAME
    if weights != directory / WEIGHTS_NAME or not recorded.is_file():
        return
    try:
        verify_sha256(weights, recorded.read_text(encoding="ascii").split()[0])
    except (ChecksumMismatch, ValueError, IndexError) as error:
        raise ConfigurationError(f"The archive's {WEIGHTS_NAME} is damaged: {error}.") from None


def _load_from_directory(directory: Path, weights: Path, overrides: Union[str, Dict[str, Any]]) -> Archive:
    from safetensors.torch import load_file

    from ipuflow.data.readers import DatasetReader
    from ipuflow.data.vocabulary import Vocabulary
    from ipuflow.models.model import Model

    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise ConfigurationError(f"{directory} holds no {CONFIG_NAME}: it is not an ipuflow archive or run directory.")
    if not weights.is_file():
        raise ConfigurationError(f"Weights file {weights} does not exist.")
    _verify_archived_weights(directory, weights)
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigurationError(f"{config_path} cannot be read ({type(error).__name__}: {error}).") from None
    if overrides:
        from ipuflow.config.params import parse_overrides

        raw = with_overrides(raw, parse_overrides(overrides))
    config = Params(raw)
    vocab_dir = directory / VOCABULARY_DIR
    vocab = Vocabulary.from_files(str(vocab_dir)) if vocab_dir.is_dir() else Vocabulary.empty()
    model_params = config.duplicate().get("model")
    if model_params is None:
        raise ConfigurationError(f"{config_path}: the config has no 'model' section.")
    model = Model.from_params(model_params, vocab=vocab)
    state = load_file(str(weights))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ConfigurationError(
            f"{weights} does not fit the model the config builds: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}."
        )
    model.eval()
    reader_params = config.duplicate().get("dataset_reader")
    reader = DatasetReader.from_params(reader_params) if reader_params is not None else None
    validation_params = config.duplicate().get("validation_dataset_reader")
    validation_reader = DatasetReader.from_params(validation_params) if validation_params is not None else reader
    meta_path = directory / META_NAME
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    return Archive(model=model, config=config, vocab=vocab, dataset_reader=reader,
                   validation_dataset_reader=validation_reader, meta=meta)
