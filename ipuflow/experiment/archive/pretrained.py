"""Copies of the pretrained models' configs and tokenizers inside a model archive, so that an
archive does not depend on paths of the machine that trained it (weights come from the archive)."""

from __future__ import annotations

import contextlib
import json
import logging
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, List, Optional

from ipuflow.config import ConfigurationError
from ipuflow.data.local_pretrained import archived_pretrained, import_transformers_offline, resolve_local_pretrained
from ipuflow.experiment.archive.pretrained_patterns import check_tokenizer_patterns
from ipuflow.experiment.archive.schema import MODELS, PRETRAINED

logger = logging.getLogger(__name__)

PRETRAINED_DIR = "pretrained"
SOURCES_FILE = "sources.json"
PRETRAINED_KEYS = ("model_name", "pretrained_model_name_or_path")
"""Config keys whose string values name local pretrained models (tokenizers and models)."""


def pretrained_names(config: Any) -> List[str]:
    """The distinct pretrained model names in a config, in the order they occur: under the
    `PRETRAINED_KEYS` anywhere, then under the model's other keys that the archive schema marks as
    pretrained names (`seq2seq_generator`'s `encoder`, `decoder` and `tokenizer`)."""
    names = _under_pretrained_keys(config)
    return names + [name for name in _named_by_the_model(config) if name not in names]


def _named_by_the_model(config: Any) -> List[str]:
    # Read from the schema, not matched by key name: elsewhere `encoder` and `tokenizer` name components.
    model = config.get("model") if isinstance(config, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("type"), str):
        return []
    keys = MODELS.get(model["type"])
    if keys is None:
        return []
    return [value for key, value in model.items() if keys.rules.get(key) is PRETRAINED and isinstance(value, str)]


def _under_pretrained_keys(config: Any) -> List[str]:
    names: List[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            if key in PRETRAINED_KEYS and isinstance(value, str) and value not in names:
                names.append(value)
            else:
                names.extend(name for name in _under_pretrained_keys(value) if name not in names)
    elif isinstance(config, list):
        for item in config:
            names.extend(name for name in _under_pretrained_keys(item) if name not in names)
    return names


def save_pretrained_copy(name: str, target: Path) -> bool:
    """Write the config and tokenizer (whichever exist) of the pretrained model `name` into `target`;
    whether anything was written."""
    transformers = import_transformers_offline()
    path = resolve_local_pretrained(name, "model_name")
    written = False
    for auto in (transformers.AutoConfig, transformers.AutoTokenizer):
        try:
            auto.from_pretrained(str(path), local_files_only=True, trust_remote_code=False).save_pretrained(str(target))
            written = True
        except (OSError, ValueError, KeyError):
            logger.debug("%s has no %s to archive", path, auto.__name__)
    return written


def add_pretrained_copies(archive: tarfile.TarFile, config_path: Path) -> None:
    """Add `pretrained/` to `archive`: a copy (config and tokenizer) of each pretrained model the
    config at `config_path` names, and `sources.json` mapping each name to its copy."""
    names = pretrained_names(json.loads(config_path.read_text(encoding="utf-8")))
    if not names:
        return
    with tempfile.TemporaryDirectory(prefix="ipuflow-pretrained-") as folder:
        sources: Dict[str, str] = {}
        for index, name in enumerate(names):
            try:
                if save_pretrained_copy(name, Path(folder) / str(index)):
                    sources[name] = str(index)
            except ConfigurationError as error:  # a path gone since training: the archive uses it as named
                logger.warning("Cannot copy %r into the archive: %s", name, error)
        if not sources:
            return
        (Path(folder) / SOURCES_FILE).write_text(json.dumps(sources, indent=1), encoding="utf-8")
        archive.add(folder, arcname=PRETRAINED_DIR)


@contextlib.contextmanager
def pretrained_copies_applied(directory: Path, user_given: Optional[FrozenSet[str]] = None,
                              source: str = "the archive") -> Iterator[None]:
    """Within the block, the pretrained names of an extracted archive at `directory` resolve to its
    copies (whose tokenizer regexes must be ones transformers ships); with `user_given`, any other
    name is refused unless it is one of those."""
    sources_path = directory / PRETRAINED_DIR / SOURCES_FILE
    if not sources_path.is_file():
        with archived_pretrained({}, user_given):
            yield
        return
    try:
        sources = json.loads(sources_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"{sources_path} is not valid JSON ({error}).") from None
    if not isinstance(sources, dict) or not all(isinstance(value, str) and value.isdigit() for value in sources.values()):
        raise ConfigurationError(f"{sources_path}: expected an object of model names to copy numbers, found {sources!r:.100}.")
    copies = {name: (directory / PRETRAINED_DIR / copy).resolve() for name, copy in sources.items()}
    for copy in sorted(set(copies.values())):
        check_tokenizer_patterns(copy, source)
    with archived_pretrained(copies, user_given):
        yield
