"""Lazy[T]: a config for T kept until the objects T needs exist."""

from __future__ import annotations

from typing import Any, Callable, Dict, Generic, Mapping, Optional, Type, TypeVar, Union

from ipuflow.config.params import Params

T = TypeVar("T")


class Lazy(Generic[T]):
    """Holds the params for a `T` and builds a fresh one on each `construct(**kwargs)`.

    Used in classmethod constructors such as `from_partial_objects`, where an argument needs objects
    built earlier (an optimizer needs the model's parameters). Precedence for an argument: the
    config's value, then `construct` keyword arguments, then the extras stored at resolution time.
    """

    def __init__(
        self,
        constructor: Union[Type[T], Callable[..., T]],
        params: Optional[Union[Params, Mapping[str, Any]]] = None,
        constructor_extras: Optional[Mapping[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        self._constructor = constructor
        self._params = params if isinstance(params, Params) else Params(dict(params or {}))
        self._constructor_extras: Dict[str, Any] = {**(constructor_extras or {}), **kwargs}

    @property
    def constructor(self) -> Union[Type[T], Callable[..., T]]:
        """What `construct` builds: the class (a registrable base picks its implementation from the params)."""
        return self._constructor

    @property
    def params(self) -> Params:
        """A copy of the params the object will be built from."""
        return self._params.duplicate()

    def at(self, history: str) -> "Lazy[T]":
        """This Lazy with its params placed at the key path `history` (e.g. ``"trainer.executor."``), so
        that the errors of what it builds name their full key paths; for a default the config left out."""
        return Lazy(self._constructor, Params(self._params.duplicate().params, history=history), self._constructor_extras)

    def construct(self, **kwargs: Any) -> T:
        """Build a new object; `kwargs` fill the arguments the config leaves out."""
        from ipuflow.config.from_params import FromParams

        extras = {**self._constructor_extras, **kwargs}
        if isinstance(self._constructor, type) and issubclass(self._constructor, FromParams):
            return self._constructor.from_params(self._params.duplicate(), **extras)  # type: ignore[return-value]
        return self._constructor(**extras)  # type: ignore[return-value]

    def __repr__(self) -> str:
        name = getattr(self._constructor, "__name__", repr(self._constructor))
        return f"Lazy({name}, {self._params.params!r})"
