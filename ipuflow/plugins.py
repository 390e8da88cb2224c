"""Loading components: ipuflow's own, the installed `ipuflow.plugins` entry points, and `--include-package`.

This module sits outside `ipuflow.config` because it names the packages that register components
(data, models, training, ...): the config system below them must not know them. It imports them
only when asked to (by name, with importlib), so importing it costs nothing.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
from importlib import metadata
from typing import Any, Callable, Iterable, List, Mapping

from ipuflow.config.errors import ConfigurationError
from ipuflow.config.import_policy import ENTRY_POINT_GROUP, remember_included

logger = logging.getLogger(__name__)

BUILTIN_PACKAGES = ("ipuflow.data.vocabulary", "ipuflow.data.tokenizers", "ipuflow.data.loader",
                    "ipuflow.data.readers", "ipuflow.models", "ipuflow.metrics", "ipuflow.execution",
                    "ipuflow.training", "ipuflow.predictors", "ipuflow.evaluation", "ipuflow.experiment",
                    "ipuflow.tuning.pruning_callback")
"""The packages and modules whose import registers ipuflow's own components."""


def import_module_and_submodules(package_name: str) -> None:
    """Import a module or package and, recursively, every submodule, so their registrations run.

    The current directory is searched first, so `--include-package my_pkg` works from a project root.
    """
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        importlib.invalidate_caches()
        try:
            module = importlib.import_module(package_name)
        except ModuleNotFoundError as error:
            if error.name and package_name.startswith(error.name):
                raise ConfigurationError(
                    f"--include-package {package_name}: no module named {error.name!r} on the Python path "
                    f"(searched the current directory {cwd} and the installed packages)."
                ) from None
            raise
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{package_name}."):
            leaf = info.name.rpartition(".")[2]
            if leaf.startswith("_") or leaf.startswith("test"):
                continue
            importlib.import_module(info.name)
    finally:
        if added:
            sys.path.remove(cwd)


def import_plugins() -> List[str]:
    """Import every module registered under the `ipuflow.plugins` entry-point group; return their names.

    A plugin that fails to import is logged, not fatal: the command may not need it.
    """
    loaded: List[str] = []
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            import_module_and_submodules(entry_point.value.split(":")[0])
            loaded.append(entry_point.name)
        except Exception as error:  # a broken plugin must not break unrelated commands
            logger.error("Plugin %r (%s) failed to import: %s", entry_point.name, entry_point.value, error)
    return loaded


def include_packages(packages: Iterable[str]) -> None:
    """Import the built-in components, the installed plugins, and each `--include-package`."""
    import_builtin_components()
    import_plugins()
    for package in packages:
        import_module_and_submodules(package)
        remember_included(package)


def import_builtin_components() -> None:
    """Import ipuflow's own registrable components (this imports torch)."""
    for name in BUILTIN_PACKAGES:
        importlib.import_module(name)


def keep_moved_modules_importable(package: str, moved: Mapping[str, str]) -> None:
    """Make each old module path under `package` name its module's new home: `moved` maps the old
    name (relative to `package`) to the new dotted path.

    The old name becomes the same module object, not a copy, so `import`, `from ... import`, a dotted
    `type` in a config and `monkeypatch.setattr("old.path.name", ...)` all keep working, and
    registrations run once."""
    parent = sys.modules[package]
    for old, new in moved.items():
        module = importlib.import_module(new)
        sys.modules[f"{package}.{old}"] = module
        if "." not in old:
            setattr(parent, old, module)


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `exports` (name -> module)
    when it is first asked for, and a submodule by its name, so that importing the package itself
    costs nothing: a command that needs one light module of it does not import torch for the rest."""

    def exported(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return exported
