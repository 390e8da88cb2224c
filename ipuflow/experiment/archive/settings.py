"""What an archive's config may decide when evaluate, predict and export run its model: an
allow-list, per component and key, with bounds (`archive_schema`), checked as the archive loads.

An archive is data from whoever shared it. Its model, readers, loaders and postprocessor are what
the model means, and stay, but only with the keys inference needs, each within its bounds: any
other key, or a value out of bounds, is refused with an error naming it. Settings about the machine
(torch.compile options, which can name a compiler to run, worker counts, cache directories, device
strings, executable-cache paths) and keys that reach a loader (`from_pretrained_kwargs`) are the
user's to choose: they are dropped with a logged note, and the user's own flags (`--device`, `-o`)
can still set them, or anything else.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List

from ipuflow.config import ConfigurationError
from ipuflow.experiment.archive.rules import OVERRIDE_NOTE, Component, Drop, Keys, Text, refused
from ipuflow.experiment.archive.schema import EXECUTOR, component_keys
from ipuflow.experiment.validation_sets import check_set_names

logger = logging.getLogger(__name__)

COMPONENT_SECTIONS = {
    "model": "model", "dataset_reader": "dataset_reader", "validation_dataset_reader": "dataset_reader",
    "data_loader": "data_loader", "validation_data_loader": "data_loader", "postprocessor": "postprocessor",
}
"""The top-level components inference builds, and the family of each."""
DATA_PATHS = ("train_data_path", "validation_data_path", "test_data_path")
"""Export's default sample data."""
UNCHECKED_DROPPED = ("num_workers", "cache_directory", "from_pretrained_kwargs")
"""What is dropped even from a component whose keys ipuflow does not know (a plugin's): every
reader and loader takes the first two, about the machine; the last reaches a loader."""


def inference_settings(raw: Dict[str, Any], source: str) -> Dict[str, Any]:
    """`raw` (an archived config) cut down to what inference may take from it, every key checked
    against the allow-list; what was dropped that a user might have expected is logged once,
    naming `source`. A key or value the allow-list refuses is a `ConfigurationError`."""
    dropped: List[str] = []
    config: Dict[str, Any] = {}
    try:
        for key, value in raw.items():
            if key in COMPONENT_SECTIONS and value is not None:
                config[key] = checked_component(COMPONENT_SECTIONS[key], value, key, dropped)
            elif key in DATA_PATHS and value is not None:
                config[key] = _data_path(value, key)
            elif key == "trainer":
                config[key] = _inference_trainer(value, dropped)
    except ConfigurationError as error:
        error.reason = f"{error.reason} (in {source})".strip()
        error.args = (error.message,)
        raise
    if dropped:
        logger.info(
            "Ignored settings of %s that are the user's to choose, not an archive's: %s. Set any of them yourself "
            "with -o/--overrides or --device if you want them.", source, ", ".join(dropped),
        )
    return config


def _data_path(value: Any, key: str) -> Any:
    """A data path, or (several validation sets) a mapping from names to paths, each checked as text
    and the mapping as training checks it (at most `MAX_VALIDATION_SETS` names that can key metrics)."""
    if isinstance(value, dict) and key == "validation_data_path":
        try:
            check_set_names(value)
        except ConfigurationError as error:
            raise ConfigurationError(f"{error.explanation} {OVERRIDE_NOTE}", path=key) from None
        return {name: Text(4096)(path, f"{key}.{name}") for name, path in value.items()}
    return Text(4096)(value, key)


def checked_component(family: str, block: Any, path: str, dropped: List[str]) -> Any:
    """The component `block` of `family` at key `path`, its keys checked against its type's
    allow-list (a type ipuflow does not register, a plugin's, is taken as given)."""
    if isinstance(block, str):
        block = {"type": block}
    keys = component_keys(family, block, path)
    if keys is None:
        dropped.extend(f"{path}.{key}" for key in UNCHECKED_DROPPED if key in block)
        return {key: value for key, value in block.items() if key not in UNCHECKED_DROPPED}
    return _checked_section(keys, block, path, dropped, component=True)


def _checked_section(keys: Keys, block: Any, path: str, dropped: List[str], component: bool = False) -> Dict[str, Any]:
    if not isinstance(block, dict):
        raise refused(path, "an object", block)
    kept: Dict[str, Any] = {}
    for key, value in block.items():
        where = f"{path}.{key}"
        rule = keys.rules.get(key, keys.others)
        if key == "type" and component:  # checked by the import policy, as every component's type is
            kept[key] = value
        elif rule is None:
            allowed = ", ".join(sorted(keys.rules)) or "none"
            raise ConfigurationError(
                f"{where}: not a setting a model archive's config may give here (it may give: {allowed}). "
                f"{OVERRIDE_NOTE}"
            )
        elif isinstance(rule, Drop):
            if rule.noted:
                dropped.append(where)
        elif isinstance(rule, Component):
            kept[key] = _component_value(rule, value, where, dropped)
        elif isinstance(rule, Keys):
            kept[key] = _checked_section(rule, value, where, dropped)
        else:
            kept[key] = rule(value, where)
    for check in keys.checks:
        check(kept, path)
    return kept


def _component_value(rule: Component, value: Any, path: str, dropped: List[str]) -> Any:
    if value is None and rule.optional:
        return None
    if not rule.mapping:
        return checked_component(rule.family, value, path, dropped)
    if not isinstance(value, dict) or len(value) > 64:
        raise refused(path, "an object of at most 64 named components", value)
    return {name: checked_component(rule.family, entry, f"{path}.{name}", dropped) for name, entry in value.items()}


def _inference_trainer(trainer: Any, dropped: List[str]) -> Dict[str, Any]:
    """The trainer section reduced to its executor's allowed settings (the rest is training's)."""
    if not isinstance(trainer, dict):
        return {}
    executor = trainer.get("executor")
    if isinstance(executor, str):
        executor = {"type": executor}
    if not isinstance(executor, dict):
        return {}
    return {"executor": _checked_section(EXECUTOR, executor, "trainer.executor", dropped, component=True)}
