"""Several validation sets: `validation_data_path` as a mapping from names to paths, each read into a
dataset named ``validation.<name>`` (one path stays the dataset ``validation``)."""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Union

from ipuflow.config import ConfigurationError

VALIDATION = "validation"
_SET_NAME = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
MAX_VALIDATION_SETS = 64
"""Each set is read and scored at every validation: a bound a shared archive cannot raise either."""


def dataset_paths(train: str, validation: Optional[Union[str, Mapping[str, str]]],
                  test: Optional[str]) -> Dict[str, Optional[str]]:
    """{dataset name: path}: ``train``, ``validation`` (one path) or ``validation.<name>`` (each of a
    mapping, checked), ``test``."""
    paths: Dict[str, Optional[str]] = {"train": train}
    if isinstance(validation, Mapping):
        check_set_names(validation)
        for name, path in validation.items():
            paths[f"{VALIDATION}.{name}"] = path
    else:
        paths[VALIDATION] = validation
    paths["test"] = test
    return paths


def path_key(dataset: str) -> str:
    """The config key of a dataset's path: ``train_data_path``, ``validation_data_path.<name>``."""
    kind, _, name = dataset.partition(".")
    return f"{kind}_data_path" + (f".{name}" if name else "")


def check_set_names(validation: Mapping[str, object]) -> None:
    """Refuse a mapping of validation sets that is empty, too large, or has a name that cannot key metrics."""
    if not validation or len(validation) > MAX_VALIDATION_SETS:
        raise ConfigurationError(f"expected a path, or a mapping of 1 to {MAX_VALIDATION_SETS} named validation sets, "
                                 f"found {len(validation)} sets.", key="validation_data_path")
    for name in validation:
        if not isinstance(name, str) or not _SET_NAME.fullmatch(name):
            raise ConfigurationError(
                f"{name!r} cannot name a validation set: its metrics are keyed validation_<name>_<metric>, so "
                "a name is letters and digits, joined by single '_' or '-'.", key="validation_data_path")


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
