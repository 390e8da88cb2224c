"""Several validation sets: `validation_data_path` as a mapping from names to paths, each read into a
dataset named ``validation.<name>`` (one path stays the dataset ``validation``)."""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Union

from ipuflow.config import ConfigurationError

VALIDATION = "validation"
_SET_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")


def dataset_paths(train: str, validation: Optional[Union[str, Mapping[str, str]]],
                  test: Optional[str]) -> Dict[str, Optional[str]]:
    """{dataset name: path}: ``train``, ``validation`` (one path) or ``validation.<name>`` (each of a
    mapping, checked), ``test``."""
    paths: Dict[str, Optional[str]] = {"train": train}
    if isinstance(validation, Mapping):
        if not validation:
            raise ConfigurationError(key="validation_data_path", expected="a path, or a mapping from names to paths",
                                     found={})
        for name, path in validation.items():
            if not isinstance(name, str) or not _SET_NAME.fullmatch(name):
                raise ConfigurationError(
                    f"{name!r} cannot name a validation set: its metrics are keyed validation_<name>_<metric>, so "
                    "a name is letters and digits, joined by single '_' or '-'.", key="validation_data_path")
            paths[f"{VALIDATION}.{name}"] = path
    else:
        paths[VALIDATION] = validation
    paths["test"] = test
    return paths


def path_key(dataset: str) -> str:
    """The config key of a dataset's path: ``train_data_path``, ``validation_data_path.<name>``."""
    kind, _, name = dataset.partition(".")
    return f"{kind}_data_path" + (f".{name}" if name else "")


def set_name(dataset: str) -> Optional[str]:
    """The validation set's name (``""`` for the one set of a single path); None for another dataset."""
    if dataset == VALIDATION:
        return ""
    return dataset[len(VALIDATION) + 1:] if dataset.startswith(VALIDATION + ".") else None


def validation_datasets(names: List[str]) -> List[str]:
    """The validation datasets among `names`, in order."""
    return [name for name in names if set_name(name) is not None]


def expand_validation(chosen: Optional[List[str]], datasets: List[str]) -> Optional[List[str]]:
    """`datasets_for_vocab_creation` with ``validation`` standing for every validation set read."""
    if chosen is None or VALIDATION in datasets:
        return chosen
    expanded: List[str] = []
    for name in chosen:
        expanded.extend(validation_datasets(datasets) if name == VALIDATION else [name])
    return expanded
