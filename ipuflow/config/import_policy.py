"""Which modules a config that came with a model archive may make ipuflow import.

A config the user wrote may name any class by its dotted path (`"my_pkg.models.MyModel"`): the user
chose that code. A config inside an archive is someone else's: while it is built, a dotted `type`
may only name a class in ipuflow itself, in an installed `ipuflow.plugins` entry point, or in a
package the user included (`--include-package`). The check looks at the module's name only, so a
refused module is never imported.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

from ipuflow.config.errors import ConfigurationError

OWN_PACKAGE = "ipuflow"

ENTRY_POINT_GROUP = "ipuflow.plugins"
"""The entry-point group under which installed packages register ipuflow components."""

# The packages this process was asked to include (`--include-package`, `include_packages`), in order.
# Configs from archives may name classes in them; meta.json records them for the archive's users.
_included: List[str] = []


def remember_included(package: str) -> None:
    """Record that `package` was included (imported at the user's request) in this process."""
    if package not in _included:
        _included.append(package)


def included_packages() -> List[str]:
    """The packages included so far in this process (`--include-package`), in the order given."""
    return list(_included)


def plugin_modules() -> Tuple[str, ...]:
    """The modules that the installed `ipuflow.plugins` entry points name."""
    from importlib import metadata  # imported here: it costs `ipuflow --help` a sixth of its start-up

    return tuple(entry_point.value.split(":")[0].strip() for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP))


def module_within(module_name: str, package: str) -> bool:
    """Whether `module_name` is `package` itself or one of its submodules."""
    return module_name == package or module_name.startswith(package + ".")


@dataclass(frozen=True)
class ArchiveImportPolicy:
    """The import rule for building the config of one archive.

    `source` says where the config came from (for messages); `trained_with` lists the packages the
    archive's meta.json says were included when it was trained (named in the message, not trusted).
    """

    source: str
    trained_with: Tuple[str, ...] = ()

    def trusted_packages(self) -> Tuple[str, ...]:
        """ipuflow, the installed plugins' modules, and every package included in this process."""
        return (OWN_PACKAGE,) + plugin_modules() + tuple(included_packages())

    def check(self, module_name: str, class_path: str) -> None:
        """Refuse, before any import, a module outside the trusted packages."""
        if any(module_within(module_name, package) for package in self.trusted_packages()):
            return
        suggested = self.package_to_include(module_name)
        trained = (
            f" The archive records that it was trained with --include-package "
            f"{' --include-package '.join(self.trained_with)}."
            if self.trained_with else ""
        )
        raise ConfigurationError(
            f"{class_path!r} names a class in the module {module_name!r}, which is not part of ipuflow, of an "
            f"installed ipuflow plugin, or of a package given with --include-package, so {self.source} may not "
            f"import it (a config from an archive can only use code you have chosen to trust).{trained} If you "
            f"trust that package, pass --include-package {suggested} (include_packages=[{suggested!r}] for "
            f"load_archive): including a package imports it and runs its code with your permissions."
        )

    def package_to_include(self, module_name: str) -> str:
        """The recorded package that holds `module_name` (the most specific), else its top-level package."""
        holders = [package for package in self.trained_with if module_within(module_name, package)]
        return max(holders, key=len) if holders else module_name.split(".")[0]

    @contextmanager
    def applied(self) -> Iterator["ArchiveImportPolicy"]:
        """Apply this policy to every dotted `type` resolved inside the `with` block."""
        token = _active_policy.set(self)
        try:
            yield self
        finally:
            _active_policy.reset(token)


_active_policy: ContextVar[Optional[ArchiveImportPolicy]] = ContextVar("ipuflow_archive_import_policy", default=None)


def check_module_may_be_imported(module_name: str, class_path: str) -> None:
    """Refuse `module_name` when an archive's config is being built and the module is not trusted."""
    policy = _active_policy.get()
    if policy is not None:
        policy.check(module_name, class_path)


def recorded_packages(meta: object) -> Tuple[str, ...]:
    """The `include_packages` a meta.json records, ignoring anything that is not a list of names."""
    packages: Sequence[object] = meta.get("include_packages", ()) if isinstance(meta, dict) else ()
    if not isinstance(packages, list):
        return ()
    return tuple(package for package in packages if isinstance(package, str) and package)
