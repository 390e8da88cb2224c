"""FromParams: building arguments from annotations, extras, strictness, and error paths."""

import logging
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import pytest

from ipuflow.config import ConfigurationError, FromParams, Lazy, Params, Registrable


class Leaf(FromParams):
    def __init__(self, a: int, b: str = "b", vocab: Optional[str] = None) -> None:
        self.a, self.b, self.vocab = a, b, vocab

    def __eq__(self, other):
        return isinstance(other, Leaf) and (self.a, self.b) == (other.a, other.b)

    def __hash__(self):
        return hash((self.a, self.b))


class Shape(Registrable):
    default_implementation = "square"


@Shape.register("square")
class Square(Shape):
    def __init__(self, side: float = 1.0, vocab: Optional[str] = None) -> None:
        self.side, self.vocab = side, vocab


@Shape.register("circle")
class Circle(Shape):
    def __init__(self, radius: float) -> None:
        self.radius = radius


class Holder(FromParams):
    def __init__(
        self,
        leaf: Leaf,
        leaves: List[Leaf] = (),
        by_name: Dict[str, Shape] = None,
        pair: Tuple[int, str] = (0, ""),
        many: Tuple[int, ...] = (),
        unique: Set[Leaf] = frozenset(),
        sequence: Sequence[int] = (),
        mapping: Mapping[str, int] = None,
        path: Path = Path("."),
        flag: bool = False,
        ratio: float = 0.5,
        shape: Optional[Shape] = None,
        lazy_leaf: Lazy[Leaf] = None,
    ) -> None:
        self.__dict__.update(locals())


def test_nested_containers_and_scalars():
    holder = Holder.from_params(Params({
        "leaf": {"a": 1},
        "leaves": [{"a": 2}, {"a": 3, "b": "x"}],
        "by_name": {"s": {"type": "square", "side": 2}, "c": "square"},
        "pair": [4, "four"],
        "many": [1, 2, 3],
        "unique": [{"a": 1}, {"a": 1}, {"a": 2}],
        "sequence": [5],
        "mapping": {"k": 1},
        "path": "/tmp/x",
        "flag": True,
        "ratio": 1,
        "shape": "circle" if False else {"type": "circle", "radius": 2},
    }))
    assert holder.leaf == Leaf(1)
    assert holder.leaves == [Leaf(2), Leaf(3, "x")]
    assert isinstance(holder.by_name["s"], Square) and holder.by_name["s"].side == 2.0
    assert isinstance(holder.by_name["c"], Square)
    assert holder.pair == (4, "four") and holder.many == (1, 2, 3)
    assert holder.unique == {Leaf(1), Leaf(2)}
    assert holder.sequence == [5] and holder.mapping == {"k": 1} and type(holder.mapping) is dict
    assert holder.path == Path("/tmp/x") and holder.flag is True
    assert holder.ratio == 1.0 and isinstance(holder.ratio, float)
    assert isinstance(holder.shape, Circle)


def test_a_bare_string_names_the_type():
    assert isinstance(Shape.from_params("circle" and Params({"type": "square"})), Square)
    holder = Holder.from_params(Params({"leaf": {"a": 1}, "shape": "square"}))
    assert isinstance(holder.shape, Square)


def test_absent_keys_are_not_passed_so_defaults_apply():
    seen = {}

    class Spy(FromParams):
        def __init__(self, **kwargs) -> None:
            seen.update(kwargs)

    class Child(Spy):
        def __init__(self, x: int = 1, **kwargs) -> None:
            super().__init__(**kwargs)
            seen["x"] = x

    Child.from_params(Params({}))
    assert seen == {"x": 1}


def test_kwargs_subclass_accepts_the_parents_arguments_and_still_rejects_unknown_keys():
    class Parent(FromParams):
        def __init__(self, a: int, b: int = 2) -> None:
            self.a, self.b = a, b

    class Child(Parent):
        def __init__(self, c: int, **kwargs) -> None:
            super().__init__(**kwargs)
            self.c = c

    child = Child.from_params(Params({"a": 1, "c": 3}))
    assert (child.a, child.b, child.c) == (1, 2, 3)
    with pytest.raises(ConfigurationError) as error:
        Child.from_params(Params({"a": 1, "c": 3, "bb": 4}))
    assert "bb: unknown key for Child; did you mean 'b'?" in str(error.value)
    assert "Valid keys: a, b, c" in str(error.value)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"leaf": {"a": "5"}}, "leaf.a: expected an integer, found a string (\"5\") (write it without quotes)"),
        ({"leaf": {"a": 1.5}}, "leaf.a: expected an integer, found a number"),
        ({"leaf": {"a": True}}, "leaf.a: expected an integer, found a boolean"),
        ({"leaf": {"a": None}}, "leaf.a: null is not allowed here; expected an integer"),
        ({"leaf": {"a": 1}, "flag": 1}, "flag: expected true or false, found an integer"),
        ({"leaf": {"a": 1}, "ratio": "0.1"}, "ratio: expected a number, found a string"),
        ({"leaf": {"a": 1}, "leaves": {"a": 1}}, "leaves: expected a list of"),
        ({"leaf": {"a": 1}, "pair": [1]}, "pair: expected a list of 2 items, found 1"),
        ({"leaf": {"a": 1}, "leaves": [{"a": 1}, {"z": 1}]}, "leaves.1.z: unknown key for Leaf"),
        ({"leaf": {"a": 1}, "by_name": {"s": {"type": "circle"}}}, "by_name.s.radius: required key 'radius' is missing"),
        ({"leaf": {"a": 1}, "by_name": {"s": {"type": "circel"}}}, "by_name.s.type: 'circel' is not a registered name for Shape. Did you mean 'circle'?"),
        ({}, "leaf: required key 'leaf' is missing at the top level"),
        ({"leaf": 3}, "leaf: expected a Leaf, found an integer"),
    ],
)
def test_errors_name_the_key_path_the_expectation_and_the_finding(config, message):
    with pytest.raises(ConfigurationError) as error:
        Holder.from_params(Params(config))
    assert message in str(error.value)


def test_null_is_accepted_for_optional_arguments_and_none_defaults():
    class Thing(FromParams):
        def __init__(self, a: Optional[int] = 3, b: int = None) -> None:
            self.a, self.b = a, b

    thing = Thing.from_params(Params({"a": None, "b": None}))
    assert thing.a is None and thing.b is None


def test_union_members_are_tried_left_to_right_without_consuming_the_input():
    class A(FromParams):
        def __init__(self, x: int) -> None:
            self.x = x

    class U(FromParams):
        def __init__(self, value: Union[int, float, str] = 0, nested: Union[A, Dict[str, A]] = None,
                     either: Union[A, List[A]] = None) -> None:
            self.value, self.nested, self.either = value, nested, either

    assert type(U.from_params(Params({"value": 1})).value) is int
    assert type(U.from_params(Params({"value": 1.5})).value) is float
    assert U.from_params(Params({"value": "5"})).value == "5"
    nested = U.from_params(Params({"nested": {"a": {"x": 1}, "b": {"x": 2}}})).nested
    assert set(nested) == {"a", "b"} and nested["b"].x == 2
    assert isinstance(U.from_params(Params({"either": [{"x": 1}]})).either, list)
    with pytest.raises(ConfigurationError, match="either: expected"):
        U.from_params(Params({"either": "nope"}))


def test_optional_union_with_a_wrong_key_is_an_error_not_a_dict():
    class Nested(FromParams):
        def __init__(self, name: str) -> None:
            self.name = name

    class Outer(FromParams):
        def __init__(self, thing: Optional[Union[str, Nested]] = None) -> None:
            self.thing = thing

    with pytest.raises(ConfigurationError):
        Outer.from_params(Params({"thing": {"wrong_varname": "x"}}))


def test_extras_reach_every_depth_and_unused_ones_are_dropped():
    holder = Holder.from_params(
        Params({"leaf": {"a": 1}, "leaves": [{"a": 2}], "by_name": {"s": {}}, "lazy_leaf": {"a": 4}}),
        vocab="V", unused=object(),
    )
    assert holder.leaf.vocab == "V" and holder.leaves[0].vocab == "V" and holder.by_name["s"].vocab == "V"
    assert holder.lazy_leaf.construct().vocab == "V"


def test_a_config_value_beats_an_extra(caplog):
    caplog.set_level(logging.WARNING)
    leaf = Leaf.from_params(Params({"a": 1, "vocab": "from config"}), vocab="from extras")
    assert leaf.vocab == "from config"
    assert "vocab" in caplog.text


def test_an_extra_fills_a_required_argument():
    assert Leaf.from_params(Params({}), a=7).a == 7


def test_a_registered_plain_class_gets_its_keys_verbatim():
    Shape.register("plain_dict_for_test")(dict)
    assert Shape.from_params(Params({"type": "plain_dict_for_test", "k": 1})) == {"k": 1}


def test_unannotated_arguments_pass_through_as_plain_values():
    class Raw(FromParams):
        def __init__(self, anything=None) -> None:
            self.anything = anything

    assert Raw.from_params(Params({"anything": {"a": [1, {"b": 2}]}})).anything == {"a": [1, {"b": 2}]}


def test_injected_only_types_cannot_be_written_in_a_config():
    class NeedsObject(FromParams):
        def __init__(self, thing: Exception) -> None:
            self.thing = thing

    with pytest.raises(ConfigurationError, match="cannot be written in a config"):
        NeedsObject.from_params(Params({"thing": {"a": 1}}))
    error = ValueError()
    assert NeedsObject.from_params(Params({}), thing=error).thing is error


def test_a_constructors_own_error_gets_the_full_key_path():
    class Engine(FromParams):
        def __init__(self, cylinders: int = 4) -> None:
            if cylinders < 1:
                raise ConfigurationError(key="cylinders", expected="at least 1", found=cylinders)

    class Car(FromParams):
        def __init__(self, engine: Engine) -> None:
            self.engine = engine

    class Garage(FromParams):
        def __init__(self, car: Car) -> None:
            self.car = car

    with pytest.raises(ConfigurationError) as error:
        Garage.from_params(Params({"car": {"engine": {"cylinders": 0}}}))
    assert str(error.value) == "car.engine.cylinders: expected at least 1, found an integer (0)."
    assert (error.value.key, error.value.path) == ("cylinders", "car.engine.cylinders")
    with pytest.raises(ConfigurationError) as error:
        Engine.from_params(Params({"cylinders": 0}))
    assert str(error.value) == "cylinders: expected at least 1, found an integer (0)."
