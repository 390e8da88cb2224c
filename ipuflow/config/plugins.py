"""Loading user components: `--include-package` and the `ipuflow.plugins` entry-point group."""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
from importlib import metadata
from typing import Iterable, List, Tuple

from ipuflow.config.errors import ConfigurationError

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ipuflow.plugins"

# The packages this process was asked to include (`--include-package`, `include_packages`), in order.
# Configs from archives may name classes in them; meta.json records them for the archive's users.
_included: List[str] = []


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


def included_packages() -> List[str]:
    """The packages included so far in this process (`--include-package`), in the order given."""
    return list(_included)


def plugin_modules() -> Tuple[str, ...]:
    """The modules that the installed `ipuflow.plugins` entry points name."""
    return tuple(entry_point.value.split(":")[0].strip() for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP))


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
        if package not in _included:
            _included.append(package)


BUILTIN_PACKAGES = ("ipuflow.data", "ipuflow.models", "ipuflow.metrics", "ipuflow.execution",
                    "ipuflow.training", "ipuflow.predictors", "ipuflow.evaluation", "ipuflow.experiment")


def import_builtin_components() -> None:
    """Import ipuflow's own registrable components (this imports torch)."""
    for name in BUILTIN_PACKAGES:
        importlib.import_module(name)
