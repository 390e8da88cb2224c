"""Describing a reader or tokenizer by its settings, for the data cache's key."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def settings_fingerprint(component: Any) -> Any:
    """A JSON-able description of `component`: its class and public attributes, recursively (a
    component can add what its attributes miss, such as a tokenizer's files, by defining
    `fingerprint()`). Private attributes (leading underscore) are left out: they hold built state
    and cache settings, which do not change the data."""
    if component is None or isinstance(component, (bool, int, float, str)):
        return component
    if isinstance(component, Path):
        return str(component)
    if isinstance(component, (list, tuple)):
        return [settings_fingerprint(item) for item in component]
    if isinstance(component, dict):
        return {str(key): settings_fingerprint(value) for key, value in sorted(component.items(), key=lambda item: str(item[0]))}
    custom = getattr(component, "fingerprint", None)
    if callable(custom):
        return custom()
    return object_fingerprint(component)


def object_fingerprint(component: Any) -> Any:
    """The class and public attributes of `component` (what `settings_fingerprint` uses by default)."""
    kind = type(component)
    description = {"class": f"{kind.__module__}.{kind.__qualname__}"}
    attributes = getattr(component, "__dict__", None)
    if attributes is None:
        return {**description, "repr": repr(component)}
    for name, value in sorted(attributes.items()):
        if not name.startswith("_"):
            description[name] = settings_fingerprint(value)
    return description
