"""Lazy[T]: deferred construction, precedence, and defaults."""

from typing import Optional

import pytest

from ipuflow.config import ConfigurationError, FromParams, Lazy, Params


class Built(FromParams):
    def __init__(self, a: int = 0, b: int = 0) -> None:
        self.a, self.b = a, b


class Owner(FromParams):
    def __init__(self, required: Lazy[Built], maybe: Lazy[Built] = None, defaulted: Lazy[Built] = Lazy(Built),
                 optional: Optional[Lazy[Built]] = Lazy(Built, constructor_extras={"a": 7})) -> None:
        self.required, self.maybe, self.defaulted, self.optional = required, maybe, defaulted, optional


def test_each_construct_builds_a_new_object():
    owner = Owner.from_params(Params({"required": {}}))
    first, second = owner.required.construct(a=2), owner.required.construct(a=2)
    assert first is not second and first.a == second.a == 2


def test_config_beats_construct_kwargs_which_beat_stored_extras():
    owner = Owner.from_params(Params({"required": {"a": 3}}), b=1)
    built = owner.required.construct(a=2, b=5)
    assert (built.a, built.b) == (3, 5)
    assert owner.required.construct().b == 1


def test_absent_null_and_default_behaviour():
    with pytest.raises(ConfigurationError, match="required key 'required' is missing"):
        Owner.from_params(Params({}))
    owner = Owner.from_params(Params({"required": {}, "optional": None}))
    assert owner.maybe is None
    assert owner.optional is None
    assert isinstance(owner.defaulted.construct(), Built)
    assert Owner.from_params(Params({"required": {}})).optional.construct().a == 7
    assert Owner.from_params(Params({"required": {}})).optional.construct(a=9).a == 9


def test_lazy_around_a_plain_callable_calls_it_with_the_kwargs():
    lazy = Lazy(lambda **kwargs: kwargs)
    assert lazy.construct(x=1) == {"x": 1}
