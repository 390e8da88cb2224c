"""Model archives: `model.tar.gz` with the config, safetensors weights, vocabulary and metadata
(and a copy of each pretrained model's config and tokenizer, `pretrained/`).

Archives hold data only (JSON config, safetensors weights, text vocabulary, no pickles), so loading
one never runs code from it: its config may only name classes in ipuflow, installed plugins and
packages the user included (see `ipuflow.config.import_policy`), only the settings that inference
needs are taken, each within bounds (an allow-list: `archive_settings`), pretrained models come
from the archive's own copies, loaded without remote code (`local_pretrained`), sizes are checked
against what the weights really hold (`archive_sizes`), and extraction is bounded and refuses
members that would land outside the target directory (`archive_extraction`).
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, Optional, Sequence, Tuple, Union

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.import_policy import ArchiveImportPolicy, recorded_packages
from ipuflow.config.params import with_overrides
from ipuflow.data.tokenizers.regex import patterns_from_untrusted_config
from ipuflow.experiment.archive.extraction import extract_archive, unreadable_archive
from ipuflow.experiment.archive.settings import inference_settings
from ipuflow.experiment.archive.sizes import check_batch_size, check_model_shapes, check_vocabulary_size, weight_shapes
from ipuflow.storage import ChecksumMismatch, file_sha256, verify_sha256, write_atomically
from ipuflow.experiment.archive.pretrained import add_pretrained_copies, pretrained_copies_applied
from ipuflow.experiment.serialization_dir import ARCHIVE_NAME, CONFIG_NAME, META_NAME, VOCABULARY_DIR
from ipuflow.training.checkpoints.checkpointer import BEST_WEIGHTS_NAME

WEIGHTS_NAME = "weights.safetensors"
# The SHA-256 of the weights, in `sha256sum` format, checked when the archive is loaded.
WEIGHTS_CHECKSUM_NAME = "weights.safetensors.sha256"
ARCHIVE_COMPRESSLEVEL = 0
"""gzip's level for `model.tar.gz`: 0 stores the members uncompressed in a valid gzip stream (any
gzip reader, and archives written at other levels, read alike). Weights barely compress (MiniLM's
91 MB to 83 MB at level 9), and compressing them was most of the end of a run: 6.9 s at level 9,
4.2 s at level 1, 0.6 s stored."""


@dataclass
class Archive:
    """A loaded archive: the model (weights loaded, in eval mode), its config and its readers."""

    model: Any
    config: Params
    vocab: Any
    dataset_reader: Any
    validation_dataset_reader: Any
    meta: Dict[str, Any]
    import_policy: ArchiveImportPolicy
    """The rule the archive's config was built under; build more from `config` inside
    `with archive.import_policy.applied():` so that it holds there too."""


def archive_model(serialization_dir: Union[str, Path], weights: Optional[Union[str, Path]] = None,
                  archive_path: Optional[Union[str, Path]] = None, weights_sha256: Optional[str] = None) -> Path:
    """Write `model.tar.gz` from a serialization directory's config, vocabulary and best weights;
    `weights_sha256` is the weights file's checksum recorded when it was written (hashed here if None),
    so that the archive carries the checksum of the bytes training wrote."""
    directory = Path(serialization_dir)
    weights_path = Path(weights) if weights is not None else directory / BEST_WEIGHTS_NAME
    if not weights_path.is_file():
        raise ConfigurationError(f"Cannot archive {directory}: no weights file {weights_path}.")
    target = Path(archive_path) if archive_path is not None else directory / ARCHIVE_NAME
    checksum = f"{weights_sha256 or file_sha256(weights_path)}  {WEIGHTS_NAME}\n".encode("ascii")

    def write(temporary: str) -> None:
        with tarfile.open(temporary, "w:gz", compresslevel=ARCHIVE_COMPRESSLEVEL) as archive:
            archive.add(directory / CONFIG_NAME, arcname=CONFIG_NAME)
            archive.add(weights_path, arcname=WEIGHTS_NAME)
            checksum_member = tarfile.TarInfo(WEIGHTS_CHECKSUM_NAME)
            checksum_member.size = len(checksum)
            archive.addfile(checksum_member, io.BytesIO(checksum))
            if (directory / VOCABULARY_DIR).is_dir():
                archive.add(directory / VOCABULARY_DIR, arcname=VOCABULARY_DIR)
            if (directory / META_NAME).is_file():
                archive.add(directory / META_NAME, arcname=META_NAME)
            add_pretrained_copies(archive, directory / CONFIG_NAME)

    write_atomically(target, write)
    return target


def load_archive(path: Union[str, Path], overrides: Union[str, Dict[str, Any]] = "",
                 weights_file: Optional[Union[str, Path]] = None, include_packages: Sequence[str] = ()) -> Archive:
    """Rebuild the model from `model.tar.gz` or from a serialization directory, with its weights.

    `overrides` edits the archived config (e.g. the reader); `weights_file` replaces the weights.
    The archive's config may only name classes in ipuflow, in installed plugins and in included
    packages: `include_packages` imports and allows more (it runs their code, as `--include-package`
    does). Nothing the archive names is imported otherwise. Of its settings, only those inference
    needs are taken (see `archive_settings`); `overrides` may set any.
    """
    if include_packages:
        from ipuflow.plugins import include_packages as include

        include(include_packages)
    path = Path(path)
    if not path.exists():
        raise ConfigurationError(f"Archive {path} does not exist.")
    try:
        if path.is_dir():
            archived = path / ARCHIVE_NAME
            if archived.is_file():
                return _load_from_directory_archive(archived, overrides, weights_file)
            weights = Path(weights_file) if weights_file else path / BEST_WEIGHTS_NAME
            return _load_from_directory(path, weights, overrides, f"the run directory {path}", confined=False)
        return _load_from_directory_archive(path, overrides, weights_file)
    except MALFORMED_ARCHIVE_ERRORS as error:
        # What a well-formed archive never raises: its files are shaped otherwise than ipuflow writes them.
        detail = " ".join(str(error).split())[:300] or type(error).__name__
        raise ConfigurationError(
            f"{path} is not a well-formed model archive: reading it failed with {type(error).__name__} ({detail}). It "
            "was not written by `ipuflow train` as it is, or was edited or damaged since; use the model.tar.gz that "
            "training wrote (--debug shows where it failed)."
        ) from error


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value (the pretrained names a user's overrides give)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for entry in value.values():
            yield from strings_in(entry)
    elif isinstance(value, list):
        for entry in value:
            yield from strings_in(entry)


MALFORMED_ARCHIVE_ERRORS = (RecursionError, IndexError, KeyError, NotADirectoryError, IsADirectoryError,
                            UnicodeDecodeError)
"""Errors that loading an archive raises only when its files are malformed (nested too deeply, cut
short, a file where a directory belongs)."""


def _load_from_directory_archive(archive_file: Path, overrides: Union[str, Dict[str, Any]],
                                 weights_file: Optional[Union[str, Path]]) -> Archive:
    with tempfile.TemporaryDirectory(prefix="ipuflow-archive-") as folder:
        extract_archive(archive_file, folder)
        if not (Path(folder) / CONFIG_NAME).is_file():
            raise unreadable_archive(archive_file, f"it holds no {CONFIG_NAME}")
        weights = Path(weights_file) if weights_file else Path(folder) / WEIGHTS_NAME
        return _load_from_directory(Path(folder), weights, overrides, f"the archive {archive_file}", confined=True)


def _verify_archived_weights(directory: Path, weights: Path) -> None:
    """Check the archive's weights against the checksum archived with them (if any)."""
    recorded = directory / WEIGHTS_CHECKSUM_NAME
    if weights != directory / WEIGHTS_NAME or not recorded.is_file():
        return
    try:
        verify_sha256(weights, recorded.read_text(encoding="ascii").split()[0])
    except (ChecksumMismatch, ValueError, IndexError) as error:
        raise ConfigurationError(f"The archive's {WEIGHTS_NAME} is damaged: {error}.") from None


def _read_json(path: Path, source: str) -> Any:
    """A JSON file of an archive: plain JSON, never Jsonnet (which could import local files)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigurationError(f"{source}: {path.name} is not valid JSON ({type(error).__name__}: "
                                 f"{str(error)[:200]}).") from None


def _load_from_directory(directory: Path, weights: Path, overrides: Union[str, Dict[str, Any]],
                         source: str, confined: bool) -> Archive:
    """Build the archive's model at `directory`; `confined`: an archive file's, whose pretrained
    names may only resolve to its own copies or to names the user's `overrides` give."""
    from ipuflow.data.readers import DatasetReader
    from ipuflow.data.vocabulary import Vocabulary
    from ipuflow.models.model import Model

    config, meta, user_given = _archived_config(directory, weights, overrides, source)
    policy = ArchiveImportPolicy(source=source, trained_with=recorded_packages(meta))
    shapes = weight_shapes(weights, source)
    copies = pretrained_copies_applied(directory, user_given if confined else None, source)
    with policy.applied(), patterns_from_untrusted_config(), copies:
        vocab_dir = directory / VOCABULARY_DIR
        check_vocabulary_size(vocab_dir, shapes, source)
        vocab = Vocabulary.from_files(str(vocab_dir)) if vocab_dir.is_dir() else Vocabulary.empty()
        if config.get("model") is None:
            raise ConfigurationError(f"{directory / CONFIG_NAME}: the config has no 'model' section.")
        check_model_shapes(lambda: Model.from_params(config.duplicate().get("model"), vocab=vocab), shapes, source,
                           strict=confined)
        model = Model.from_params(config.duplicate().get("model"), vocab=vocab)
        _load_weights(model, weights, source)
        model.eval()
        reader_params = config.duplicate().get("dataset_reader")
        reader = DatasetReader.from_params(reader_params) if reader_params is not None else None
        validation_params = config.duplicate().get("validation_dataset_reader")
        validation_reader = DatasetReader.from_params(validation_params) if validation_params is not None else reader
    return Archive(model=model, config=config, vocab=vocab, dataset_reader=reader,
                   validation_dataset_reader=validation_reader, meta=meta if isinstance(meta, dict) else {},
                   import_policy=policy)


def _archived_config(directory: Path, weights: Path, overrides: Union[str, Dict[str, Any]],
                     source: str) -> Tuple[Params, Any, FrozenSet[str]]:
    """The config at `directory` as inference may use it, with the user's `overrides`; its meta file
    (empty without one); and the strings the overrides give. Checks that the weights are there and
    intact first."""
    config_path = directory / CONFIG_NAME
    if not config_path.is_file():
        raise ConfigurationError(f"{directory} holds no {CONFIG_NAME}: it is not an ipuflow archive or run directory.")
    if not weights.is_file():
        raise ConfigurationError(f"Weights file {weights} does not exist.")
    _verify_archived_weights(directory, weights)
    raw = _read_json(config_path, source)
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{source}: {CONFIG_NAME} holds {type(raw).__name__}, not a config object.")
    meta_path = directory / META_NAME
    meta = _read_json(meta_path, source) if meta_path.is_file() else {}
    raw = inference_settings(raw, source)  # before the user's overrides, which may set anything
    check_batch_size(raw, source)
    user_given: FrozenSet[str] = frozenset()
    if overrides:
        from ipuflow.config.params import parse_overrides

        parsed = parse_overrides(overrides)
        user_given = frozenset(strings_in(parsed))
        raw = with_overrides(raw, parsed)
    return Params(raw), meta, user_given


def _load_weights(model: Any, weights: Path, source: str) -> None:
    """Load the safetensors file `weights` into `model`, every parameter and buffer of it and no other."""
    from safetensors.torch import load_file

    try:
        state = load_file(str(weights))
    except Exception as error:  # safetensors raises its own SafetensorError, not an OSError
        raise ConfigurationError(f"{source}: the weights file {weights.name} is not readable safetensors "
                                 f"({error}).") from None
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as error:  # a tensor of another shape than the config's model has
        detail = " ".join(str(error).split())
        raise ConfigurationError(f"{source}: the weights do not fit the model the config builds "
                                 f"({detail[:500]}).") from None
    if missing or unexpected:
        raise ConfigurationError(
            f"{weights} does not fit the model the config builds: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}."
        )
