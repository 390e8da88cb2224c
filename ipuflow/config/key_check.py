"""Checking a whole config's keys and `type` names before anything is built.

The resolver finds a bad key only when it builds the section that holds it, which for a trainer
key is after the data has been read and the vocabulary counted, and it stops at the first. This
walks the config along the same constructor signatures the resolver reads (`config_parameters`)
without building anything, and reports every unknown key and unknown registered name at once, and
every optional package a named component declares (`required_packages`) or a `package://` value
names that is not installed.
It only reports what the resolver would refuse: where it cannot tell (a value for `Any`, a union
whose members disagree, a class that takes its keys verbatim) it says nothing and leaves the
value to the resolver.
"""

from __future__ import annotations

import typing
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ipuflow.config.allennlp_names import allennlp_renamed_key, allennlp_renamed_type
from ipuflow.config.errors import ConfigurationError
from ipuflow.config.from_params import (
    _DICT_ORIGINS, _LIST_ORIGINS, _SET_ORIGINS, _UNION_TYPES, FromParams, config_parameters, unknown_key_error,
)
from ipuflow.config.injected import injected_arguments
from ipuflow.config.lazy import Lazy
from ipuflow.config.params import Params
from ipuflow.config.requirements import PackageRequirement, missing_package_error, missing_pretrained_packages


def key_errors(config: Any, cls: type, constructor: Optional[Callable[..., Any]] = None, history: str = "") -> List[ConfigurationError]:
    """Every unknown key and unknown `type` name in `config` (a dict or `Params`) for building
    `cls` (with `constructor`, default: as the resolver would pick), each with its key path, and
    every optional package that the config needs and this environment lacks."""
    raw = config.as_dict() if isinstance(config, Params) else config
    errors: List[ConfigurationError] = []
    if constructor is None:
        _check_value(raw, cls, history.rstrip("."), errors)
    else:
        _check_object(raw, cls, constructor, history, errors)
    return errors + missing_pretrained_packages(raw, history.rstrip("."))


def check_config_keys(config: Any, cls: type, constructor: Optional[Callable[..., Any]] = None) -> None:
    """Raise one `ConfigurationError` naming every unknown key and `type` name in `config`."""
    raise_together(key_errors(config, cls, constructor))


def raise_together(errors: Sequence[ConfigurationError]) -> None:
    """Raise `errors` as one `ConfigurationError` that lists them all (nothing if there are none)."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        listed = " ".join(f"({number}) {error.message}" for number, error in enumerate(errors, 1))
        raise ConfigurationError(f"the config has {len(errors)} mistakes, all listed here: {listed}")


def _is_family(cls: type) -> bool:
    """Whether the resolver dispatches `cls` on `type` (as `FromParams.from_params` decides)."""
    from ipuflow.config.registrable import Registrable

    return issubclass(cls, Registrable) and (cls in Registrable._registry or Registrable in cls.__bases__)


def _check_value(value: Any, annotation: Any, path: str, errors: List[ConfigurationError]) -> None:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if value is None or annotation is Any:
        return
    if origin in _UNION_TYPES:
        _check_union(value, [member for member in args if member is not type(None)], path, errors)
        return
    if annotation is Lazy or origin is Lazy:
        if args:
            _check_value(value, args[0], path, errors)
        return
    if isinstance(annotation, type) and issubclass(annotation, FromParams):
        _check_component(value, annotation, path, errors)
        return
    if (origin in _LIST_ORIGINS or origin in _SET_ORIGINS) and args and isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, args[0], f"{path}.{index}", errors)
    elif origin is tuple and args and isinstance(value, list):
        members = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        for index, (item, member) in enumerate(zip(value, members)):
            _check_value(item, member, f"{path}.{index}", errors)
    elif origin in _DICT_ORIGINS and len(args) == 2 and isinstance(value, dict):
        for key, item in value.items():
            _check_value(item, args[1], f"{path}.{key}", errors)


def _check_union(value: Any, members: List[Any], path: str, errors: List[ConfigurationError]) -> None:
    """A union's value is reported only when every member that could take it refuses it, and then
    by the one member that takes values of its JSON shape (the one the user meant)."""
    verdicts: List[Tuple[Any, List[ConfigurationError]]] = []
    for member in members:
        attempt: List[ConfigurationError] = []
        _check_value(value, member, path, attempt)
        if not attempt:
            return
        verdicts.append((member, attempt))
    if len(verdicts) == 1:
        errors.extend(verdicts[0][1])


def _check_component(value: Any, cls: type, path: str, errors: List[ConfigurationError]) -> None:
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        return  # the resolver reports a wrong shape with what it expected
    constructor: Callable[..., Any] = cls.__init__  # type: ignore[misc]
    if _is_family(cls):
        type_name = value.get("type", cls.default_implementation)  # type: ignore[attr-defined]
        if not isinstance(type_name, str):
            return
        try:
            subclass, constructor_name = cls.resolve_class_name(type_name)  # type: ignore[attr-defined]
        except ConfigurationError as error:
            errors.append(ConfigurationError(str(error), path=f"{path}.type" if path else "type"))
            renamed = allennlp_renamed_type(cls, type_name)
            if renamed is None:
                return  # no class to check the section's other keys against
            # AllenNLP's name for an ipuflow type: its keys are checked now, not after the rename.
            subclass, constructor_name = cls.resolve_class_name(renamed)  # type: ignore[attr-defined]
        if not (isinstance(subclass, type) and issubclass(subclass, FromParams)):
            return  # a plain class takes its keys verbatim
        cls = subclass
        constructor = subclass.__init__ if constructor_name is None else getattr(subclass, constructor_name)  # type: ignore[misc]
        for requirement in _declared_requirements(subclass, value):
            if not requirement.installed():
                errors.append(missing_package_error(requirement, repr(type_name), f"{path}.type" if path else "type"))
        value = {key: item for key, item in value.items() if key != "type"}
    _check_object(value, cls, constructor, f"{path}." if path else "", errors)


def _declared_requirements(cls: type, value: Dict[str, Any]) -> List[PackageRequirement]:
    """The optional packages `cls` declares it needs, and those its config `value` makes it need."""
    declared = list(getattr(cls, "required_packages", ()))
    for_config = getattr(cls, "packages_for_config", None)
    return declared + list(for_config(value)) if callable(for_config) else declared


def _check_object(value: Any, cls: type, constructor: Callable[..., Any], history: str,
                  errors: List[ConfigurationError]) -> None:
    if not isinstance(value, dict):
        return
    parameters = config_parameters(cls, constructor)
    for key, item in value.items():
        if key in parameters:
            _check_value(item, parameters[key].annotation, f"{history}{key}", errors)
        else:
            valid = [name for name in parameters if name not in injected_arguments(cls)]
            errors.append(unknown_key_error(cls, key, valid, f"{history}{key}", item))
            renamed = allennlp_renamed_key(cls, key)
            if renamed in parameters:  # what is under the renamed key is checked too, under the user's path
                _check_value(item, parameters[renamed].annotation, f"{history}{key}", errors)
