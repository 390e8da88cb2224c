"""Named registries of implementations, one namespace per base class."""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from collections import defaultdict
from types import ModuleType
from typing import Callable, ClassVar, DefaultDict, Dict, List, Optional, Tuple, Type, TypeVar

from ipuflow.config.errors import ConfigurationError, did_you_mean
from ipuflow.config.from_params import FromParams
from ipuflow.config.import_policy import check_module_may_be_imported

logger = logging.getLogger(__name__)

T = TypeVar("T", bound="Registrable")

_INCLUDE_PACKAGE_ADVICE = (
    "If it is your own component, make sure the module that registers it is imported: pass "
    "--include-package my_package, install it as a plugin (entry-point group 'ipuflow.plugins'), "
    'or give the fully qualified class name, e.g. {"type": "my_package.models.MyModel"}.'
)


class Registrable(FromParams):
    """A base class whose subclasses register under names that configs refer to as `type`.

    `@Model.register("my_model")` adds a class to `Model`'s namespace; `Model.by_name("my_model")`
    finds it. Each class that `register` is called on is its own namespace.
    """

    _registry: ClassVar[DefaultDict[type, Dict[str, Tuple[type, Optional[str]]]]] = defaultdict(dict)
    default_implementation: ClassVar[Optional[str]] = None

    @classmethod
    def register(
        cls, name: str, constructor: Optional[str] = None, exist_ok: bool = False
    ) -> Callable[[Type[T]], Type[T]]:
        """A decorator that registers a class under `name`, built with `constructor` if given.

        `constructor` names a classmethod (such as `from_partial_objects`) that configs call
        instead of `__init__`. A name already in use is an error unless `exist_ok`.
        """
        registry = Registrable._registry[cls]

        def add_to_registry(subclass: Type[T]) -> Type[T]:
            if name in registry:
                existing = registry[name][0]
                if not exist_ok:
                    raise ConfigurationError(
                        f"Cannot register {name!r} as {subclass.__name__} for {cls.__name__}: the name is "
                        f"already in use for {existing.__name__}. Pass exist_ok=True to replace it."
                    )
                logger.info("%s: %r now names %s instead of %s", cls.__name__, name, subclass.__name__, existing.__name__)
            if constructor is not None and not callable(getattr(subclass, constructor, None)):
                raise ConfigurationError(f"{subclass.__name__} has no method {constructor!r} to register as a constructor.")
            adopted = cls.adopt(subclass) if not issubclass(subclass, cls) else None
            registry[name] = (adopted or subclass, constructor)
            return subclass

        return add_to_registry

    @classmethod
    def resolve_class_name(cls, name: str) -> Tuple[type, Optional[str]]:
        """The class and constructor name for `name`: a registered name or a dotted class path.

        A dotted path must name a subclass of this base; it is checked before anything is built.
        """
        registry = Registrable._registry.get(cls, {})
        if name in registry:
            return registry[name]
        if "." in name:
            return cls._class_from_path(name), None
        available = cls.list_available()
        from ipuflow.config.allennlp_names import allennlp_type_advice

        advice = allennlp_type_advice(cls, name)
        if advice is not None:
            raise ConfigurationError(f"{name!r} is not a registered name for {cls.__name__}: {advice} "
                                     f"Registered names: {', '.join(available) or '(none)'}.")
        raise ConfigurationError(
            f"{name!r} is not a registered name for {cls.__name__}.{did_you_mean(name, available)} "
            f"Registered names: {', '.join(available) or '(none)'}. {_INCLUDE_PACKAGE_ADVICE}"
        )

    @classmethod
    def _class_from_path(cls, name: str) -> type:
        """The subclass of `cls` that the dotted path `name` names, importing its module if allowed."""
        module_name, _, class_name = name.rpartition(".")
        if not all(part.isidentifier() for part in name.split(".")):
            raise ConfigurationError(
                f"{name!r} is neither a registered name for {cls.__name__} nor a class path such as "
                f"'my_package.module.MyClass'."
            )
        already_imported = sys.modules.get(module_name)
        if already_imported is not None and class_name in vars(already_imported):
            # Looking into a module that is already loaded runs nothing (its __dict__, not a module
            # __getattr__), so a function or a foreign class is refused for what it is first.
            cls._subclass_in(already_imported, name)
        # An archive's config may only use trusted packages: decided on the name, before importing.
        check_module_may_be_imported(module_name, name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            raise ConfigurationError(
                f"{name!r} looks like a path to a class, but its module {module_name!r} cannot be "
                f"imported ({error})."
            ) from error
        return cls._subclass_in(module, name)

    @classmethod
    def _subclass_in(cls, module: ModuleType, name: str) -> type:
        """The attribute of `module` that `name` ends with, if it is a subclass of `cls` (nothing is called)."""
        module_name, _, class_name = name.rpartition(".")
        if not hasattr(module, class_name):
            raise ConfigurationError(
                f"{name!r} looks like a path to a class, but module {module_name!r} has no {class_name!r}."
            )
        found = getattr(module, class_name)
        if isinstance(found, type) and not issubclass(found, cls):
            found = cls.adopt(found) or found
        if not (isinstance(found, type) and issubclass(found, cls)):
            raise ConfigurationError(
                f"{name!r} cannot be used as a {cls.__name__}: it names {_describe_object(found)}, and a "
                f"dotted type must name a subclass of {cls.__name__}."
            )
        return found

    @classmethod
    def adopt(cls, foreign: type) -> Optional[type]:
        """A subclass of this base made from `foreign`, a class that is not one, where the base can
        take such classes as they are (`Model` takes a plain `torch.nn.Module`); None otherwise."""
        return None

    @classmethod
    def by_name(cls: Type[T], name: str) -> Callable[..., T]:
        """The class registered as `name`, or its registered constructor method."""
        subclass, constructor = cls.resolve_class_name(name)
        return subclass if constructor is None else getattr(subclass, constructor)

    @classmethod
    def list_available(cls) -> List[str]:
        """Registered names, the default implementation first, the rest in registration order."""
        names = list(Registrable._registry.get(cls, {}))
        default = cls.default_implementation
        if default is None:
            return names
        if default not in names:
            raise ConfigurationError(f"The default implementation {default!r} of {cls.__name__} is not registered.")
        return [default] + [name for name in names if name != default]

    @classmethod
    def registered_name(cls, subclass: type) -> Optional[str]:
        """The first name under which `subclass` is registered in this namespace, if any."""
        for name, (registered, _) in Registrable._registry.get(cls, {}).items():
            if registered is subclass:
                return name
        return None


def _describe_object(found: object) -> str:
    """What a dotted path turned out to name, for the error message (nothing is called)."""
    if isinstance(found, type):
        return f"the class {found.__module__}.{found.__qualname__}"
    if inspect.isbuiltin(found):
        return "a built-in function"
    if inspect.isroutine(found):
        return "a function"
    if inspect.ismodule(found):
        return "a module"
    return f"a {type(found).__name__} object"


def registrable_bases() -> List[type]:
    """Every class that owns a registry, in the order they were first registered on."""
    return list(Registrable._registry)
