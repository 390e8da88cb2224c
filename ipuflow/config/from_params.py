"""FromParams: building objects from config dicts by reading constructor type annotations.

The rules follow AllenNLP 2.10's resolver, made stricter where it was lax (design.md §3): an unknown
key is always an error, `null` is accepted only where `None` is, and a string is never a number.
"""

from __future__ import annotations

import collections.abc
import copy
import inspect
import json
import logging
import os
import pathlib
import sys
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type, TypeVar, Union

from ipuflow.config.errors import ConfigurationError, closest_match, describe_value
from ipuflow.config.lazy import Lazy
from ipuflow.config.params import Params

logger = logging.getLogger(__name__)

T = TypeVar("T", bound="FromParams")

REQUIRED = inspect.Parameter.empty
"""The `default` of a `ConfigParameter` that the config must give."""

if sys.version_info >= (3, 10):
    from types import UnionType

    _UNION_TYPES: Tuple[Any, ...] = (Union, UnionType)
else:  # pragma: no cover
    _UNION_TYPES = (Union,)

_LIST_ORIGINS = (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
                 collections.abc.Collection)
_SET_ORIGINS = (set, frozenset, collections.abc.Set, collections.abc.MutableSet)
_DICT_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


@dataclass(frozen=True)
class ConfigParameter:
    """One constructor argument as the resolver sees it: name, resolved annotation and default."""

    name: str
    annotation: Any
    default: Any

    @property
    def required(self) -> bool:
        """Whether the config (or an extra) must supply it."""
        return self.default is REQUIRED


class FromParams:
    """Mixin for classes that can be built from a `Params` object by their constructor annotations."""

    @classmethod
    def from_params(
        cls: Type[T],
        params: Any,
        constructor_to_call: Optional[Callable[..., T]] = None,
        constructor_to_inspect: Optional[Callable[..., Any]] = None,
        **extras: Any,
    ) -> T:
        """Build an instance from `params`; `extras` are objects passed in by parameter name.

        For a registrable base, ``type`` picks the implementation (the default implementation when
        absent). A bare string means ``{"type": string}``.
        """
        from ipuflow.config.registrable import Registrable

        if params is None:
            return None  # type: ignore[return-value]
        params = _as_params(params, cls)
        # A family base dispatches on `type`, also when nothing is registered yet: a dotted class path
        # works for every family.
        family = issubclass(cls, Registrable) and (cls in Registrable._registry or Registrable in cls.__bases__)
        try:
            if constructor_to_call is None and family:
                return _build_registered(cls, params, extras)  # type: ignore[arg-type]
            if constructor_to_call is None:
                constructor_to_call = cls
                constructor_to_inspect = constructor_to_inspect or cls.__init__
            constructor_to_inspect = constructor_to_inspect or constructor_to_call
            kwargs = build_arguments(cls, constructor_to_inspect, params, extras)
            return constructor_to_call(**kwargs)
        except ConfigurationError as error:
            # The constructor named its key relative to its own section; only here is it known where
            # that section sits in this config. Located in place, so a subclass keeps its type, and
            # once: an error from a nested section already carries its full path.
            error.locate(params.history)
            raise


def _as_params(params: Any, cls: type) -> Params:
    if isinstance(params, Params):
        return params
    if isinstance(params, str):
        return Params({"type": params})
    if isinstance(params, Mapping):
        return Params(dict(params))
    raise ConfigurationError(expected=f"an object to build {cls.__name__}", found=params)


def _build_registered(base: type, params: Params, extras: Dict[str, Any]) -> Any:
    """Dispatch on ``type`` to a registered implementation of `base` and build it."""
    available = base.list_available()  # type: ignore[attr-defined]
    default = base.default_implementation  # type: ignore[attr-defined]
    if "type" not in params and not available:
        raise ConfigurationError(
            f"{base.__name__} has no registered implementations to build; give the class path of one as \"type\" "
            f"(e.g. \"my_package.module.My{base.__name__}\"), or load the package that registers them with "
            f"--include-package.",
            path=params.path_of("type"),
        )
    if "type" not in params and default is None:
        raise ConfigurationError(f"required key 'type' is missing; choose one of: {', '.join(available)}.",
                                 path=params.path_of("type"))
    type_name = params.pop("type", default)
    if not isinstance(type_name, str):
        raise ConfigurationError(path=params.path_of("type"), expected="a registered name", found=type_name)
    try:
        subclass, constructor_name = base.resolve_class_name(type_name)  # type: ignore[attr-defined]
    except ConfigurationError as error:
        raise ConfigurationError(str(error), path=params.path_of("type")) from None
    if not (isinstance(subclass, type) and issubclass(subclass, FromParams)):
        # A plain class (e.g. a torch module) registered directly: its keys go to it verbatim.
        return subclass(**params.as_dict())
    if constructor_name is None:
        constructor_to_call: Callable[..., Any] = subclass
        constructor_to_inspect: Callable[..., Any] = subclass.__init__
    else:
        constructor_to_call = constructor_to_inspect = getattr(subclass, constructor_name)
    return subclass.from_params(
        params,
        constructor_to_call=constructor_to_call,
        constructor_to_inspect=constructor_to_inspect,
        **_extras_accepted_by(subclass.from_params, extras),
    )


# -- signatures ---------------------------------------------------------------------------------------


def config_parameters(cls: type, constructor: Callable[..., Any]) -> Dict[str, ConfigParameter]:
    """The arguments a config can give `constructor` (building `cls`), with resolved annotations.

    A `**kwargs` constructor also takes the arguments of its closest FromParams parent class, as its
    `super().__init__(**kwargs)` call would; on a name clash the subclass's own annotation wins.
    """
    if isinstance(constructor, type):
        constructor = constructor.__init__  # type: ignore[misc]  # the class's own __init__, unbound
    function = getattr(constructor, "__func__", constructor)
    if function is object.__init__ or _belongs_to_foreign_class(cls, function):
        return {}
    signature = inspect.signature(function)
    hints = _type_hints(function)
    parameters: Dict[str, ConfigParameter] = {}
    takes_kwargs = False
    for index, parameter in enumerate(signature.parameters.values()):
        if index == 0 and parameter.name in ("self", "cls"):
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            takes_kwargs = True
            continue
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        annotation = hints.get(parameter.name, parameter.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        parameters[parameter.name] = ConfigParameter(parameter.name, annotation, parameter.default)
    if takes_kwargs:
        parent = next((base for base in cls.__mro__[1:] if issubclass(base, FromParams) and base is not FromParams), None)
        if parent is not None:
            inherited = config_parameters(parent, parent.__init__)
            parameters = {**inherited, **parameters}
    return parameters


def _belongs_to_foreign_class(cls: type, function: Callable[..., Any]) -> bool:
    """Whether `function` is an `__init__` inherited from a class outside the FromParams world
    (e.g. `torch.nn.Module.__init__`), whose arguments a config cannot meaningfully give."""
    if getattr(function, "__name__", "") != "__init__":
        return False
    for klass in cls.__mro__:
        if klass.__dict__.get("__init__") is function:
            return not issubclass(klass, FromParams)
    return False


def _type_hints(function: Callable[..., Any]) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception:  # an annotation names something only imported under TYPE_CHECKING
        hints: Dict[str, Any] = {}
        namespace = getattr(function, "__globals__", {})
        for name, annotation in getattr(function, "__annotations__", {}).items():
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, namespace)  # noqa: S307 - the module's own annotation
                except Exception:
                    annotation = Any
            hints[name] = annotation
        return hints


def _extras_accepted_by(function: Callable[..., Any], extras: Dict[str, Any]) -> Dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return extras
    names = {p.name for p in parameters}
    return {key: value for key, value in extras.items() if key in names}


# -- arguments ----------------------------------------------------------------------------------------


def unknown_key_error(cls: type, key: str, valid: List[str], path: str, value: Any = None) -> ConfigurationError:
    """The error for a config key that no argument of `cls`'s constructor takes: the closest valid
    key, or, for a key from AllenNLP 2.10's configs, what ipuflow has in its place (worded for the
    key's `value` where that helps)."""
    from ipuflow.config.allennlp_names import allennlp_key_advice

    replacement = getattr(cls, "replaced_keys", {}).get(key)
    if replacement is not None:  # a key of another tool (AllenNLP) that ipuflow spells differently
        return ConfigurationError(replacement, path=path)
    advice = allennlp_key_advice(cls, key, value)
    if advice is not None:
        return ConfigurationError(f"unknown key for {cls.__name__}. {advice} Valid keys: {', '.join(valid) or '(none)'}.",
                                  path=path)
    match = closest_match(key, valid)
    return ConfigurationError(
        f"unknown key for {cls.__name__}" + (f"; did you mean {match!r}?" if match else ".")
        + f" Valid keys: {', '.join(valid) or '(none)'}.",
        path=path,
    )



def build_arguments(cls: type, constructor: Callable[..., Any], params: Params, extras: Mapping[str, Any]) -> Dict[str, Any]:
    """The keyword arguments for `constructor`, built from `params` and the `extras` it takes.

    A key the config leaves out is not passed, so the constructor's default applies. Keys that no
    argument takes are an error naming the key path and the closest valid key.
    """
    parameters = config_parameters(cls, constructor)
    # Unknown keys first: a misspelt key also looks like a missing one, and "did you mean" helps more.
    unknown = next((key for key in params if key not in parameters), None)
    if unknown is not None:
        raise unknown_key_error(cls, unknown, [name for name in parameters if name not in extras], params.path_of(unknown),
                                params.params.get(unknown))
    kwargs: Dict[str, Any] = {}
    for name, parameter in parameters.items():
        path = params.path_of(name)
        if name not in params:
            if name in extras:
                kwargs[name] = extras[name]
            elif parameter.required:
                raise params.missing_key_error(name)
            elif isinstance(parameter.default, Lazy):
                # Still the default, but one that knows its key path, for the errors of what it builds.
                kwargs[name] = parameter.default.at(f"{path}.")
            continue
        if name in extras:
            logger.warning("%s is given in the config and also passed in by ipuflow; the config's value is used.", path)
        value = params.params.pop(name)
        if value is None and parameter.default is None:
            logger.info("%s = null", path)
            kwargs[name] = None
            continue
        kwargs[name] = construct_value(value, parameter.annotation, path, extras)
    return kwargs


def construct_value(value: Any, annotation: Any, path: str, extras: Mapping[str, Any]) -> Any:
    """Turn a raw config value into what `annotation` asks for; errors name `path`."""

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)

    if annotation is Any or annotation is object:
        return _passed_through(value, path)
    if origin in _UNION_TYPES:
        return _construct_union(value, args, annotation, path, extras)
    if value is None:
        raise ConfigurationError(f"null is not allowed here; expected {type_description(annotation)}.", path=path)
    if annotation is Lazy or origin is Lazy or (isinstance(annotation, type) and issubclass(annotation, FromParams)):
        return _construct_component(value, annotation, path, extras)
    if annotation in (bool, int, float, str) or annotation in (pathlib.Path, os.PathLike):
        return _construct_scalar(value, annotation, path)
    if origin is typing.Literal:
        if value not in args:
            raise ConfigurationError(path=path, expected=f"one of {', '.join(json.dumps(a) for a in args)}", found=value)
        logger.info("%s = %s", path, json.dumps(value))
        return value
    if (origin in _LIST_ORIGINS or annotation in (list, tuple) or origin in _SET_ORIGINS or origin is tuple
            or origin in _DICT_ORIGINS or annotation is dict):
        return _construct_collection(value, annotation, path, extras)
    if isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        raise ConfigurationError(
            f"a {annotation.__name__} cannot be written in a config (ipuflow passes it in); found {describe_value(value)}.",
            path=path,
        )
    # Callables and other annotations the resolver cannot check: the value goes through as it is.
    return _passed_through(value, path)


def _passed_through(value: Any, path: str) -> Any:
    """A value the annotation does not check, logged and returned as the config wrote it."""
    logger.info("%s = %s", path, json.dumps(value, default=str))
    return value


def _construct_component(value: Any, annotation: Any, path: str, extras: Mapping[str, Any]) -> Any:
    """A registrable component (a name or an object with "type"), built now or, for `Lazy[...]`, later."""
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        raise ConfigurationError(path=path, expected=type_description(annotation), found=value)
    if annotation is Lazy or typing.get_origin(annotation) is Lazy:
        args = typing.get_args(annotation)
        return Lazy(args[0] if args else Any, params=Params(copy.deepcopy(value), history=f"{path}."),
                    constructor_extras=dict(extras))
    return annotation.from_params(Params(value, history=f"{path}."), **_extras_accepted_by(annotation.from_params, dict(extras)))


def _construct_collection(value: Any, annotation: Any, path: str, extras: Mapping[str, Any]) -> Any:
    """A list, set, tuple or dict, each item built for its annotation (`path.i`, `path.key`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in _DICT_ORIGINS or annotation is dict:
        if not isinstance(value, dict):
            raise ConfigurationError(path=path, expected=type_description(annotation), found=value)
        value_type = args[1] if len(args) == 2 else Any
        return {key: construct_value(item, value_type, f"{path}.{key}", extras) for key, item in value.items()}
    items = _expect_list(value, annotation, path)
    if origin in _LIST_ORIGINS or annotation in (list, tuple):
        element = args[0] if args else Any
        return [construct_value(item, element, f"{path}.{i}", extras) for i, item in enumerate(items)]
    if origin in _SET_ORIGINS:
        element = args[0] if args else Any
        return {construct_value(item, element, f"{path}.{i}", extras) for i, item in enumerate(items)}
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(construct_value(item, args[0], f"{path}.{i}", extras) for i, item in enumerate(items))
    if len(items) != len(args):
        raise ConfigurationError(f"expected a list of {len(args)} items, found {len(items)}.", path=path)
    return tuple(construct_value(item, arg, f"{path}.{i}", extras) for i, (item, arg) in enumerate(zip(items, args)))


def _construct_union(value: Any, members: Tuple[Any, ...], annotation: Any, path: str, extras: Mapping[str, Any]) -> Any:
    candidates = [member for member in members if member is not type(None)]
    if value is None:
        if len(candidates) < len(members):
            logger.info("%s = null", path)
            return None
        raise ConfigurationError(f"null is not allowed here; expected {type_description(annotation)}.", path=path)
    if len(candidates) == 1:
        return construct_value(value, candidates[0], path, extras)
    failures: List[str] = []
    for member in candidates:
        attempt = copy.deepcopy(value)  # a failed member must not consume or change the input
        try:
            return construct_value(attempt, member, path, extras)
        except ConfigurationError as error:
            failures.append(f"as {type_description(member)}: {error}")
    raise ConfigurationError(
        f"expected {type_description(annotation)}, found {describe_value(value)} ({'; '.join(failures)}).", path=path
    )


def _construct_scalar(value: Any, annotation: Any, path: str) -> Any:
    if annotation is bool:
        ok = isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif annotation is str:
        ok = isinstance(value, str)
    else:  # a path
        ok = isinstance(value, str)
        value = pathlib.Path(value) if ok else value
    if not ok:
        hint = " (write it without quotes)" if isinstance(value, str) and annotation in (int, float, bool) else ""
        raise ConfigurationError(f"expected {type_description(annotation)}, found {describe_value(value)}{hint}.", path=path)
    logger.info("%s = %s", path, json.dumps(value, default=str))
    return value


def _expect_list(value: Any, annotation: Any, path: str) -> List[Any]:
    if not isinstance(value, list):
        raise ConfigurationError(path=path, expected=type_description(annotation), found=value)
    return value


def type_description(annotation: Any) -> str:
    """How an annotation reads in an error message or in `ipuflow components`."""

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    simple = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
              pathlib.Path: "a path", os.PathLike: "a path", Any: "any value", dict: "an object",
              list: "a list"}
    if annotation in simple:
        return simple[annotation]
    if origin in _UNION_TYPES:
        members = [type_description(a) for a in args if a is not type(None)]
        text = " or ".join(members)
        return f"{text} or null" if type(None) in args else text
    if origin is Lazy:
        return type_description(args[0]) if args else "an object"
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in _LIST_ORIGINS or origin in _SET_ORIGINS or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return f"a list of {_plural(type_description(args[0]))}" if args else "a list"
    if origin is tuple:
        return "a list of [" + ", ".join(type_description(a) for a in args) + "]"
    if origin in _DICT_ORIGINS:
        if len(args) != 2 or args[1] is Any:
            return "an object"
        return f"an object whose values are {_plural(type_description(args[1]))}"
    if isinstance(annotation, type):
        from ipuflow.config.registrable import Registrable

        if issubclass(annotation, Registrable) and annotation in Registrable._registry:
            return f"{_article(annotation.__name__)} {annotation.__name__} (a registered name or an object with \"type\")"
        return f"{_article(annotation.__name__)} {annotation.__name__}"
    return str(annotation).replace("typing.", "")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _plural(description: str) -> str:
    """"a list of strings" → "lists of strings": drop the article and pluralise the first noun."""
    for article in ("an ", "a "):
        if description.startswith(article):
            noun, _, rest = description[len(article):].partition(" ")
            return f"{noun}s {rest}".rstrip()
    return description
