"""Registrable: registration, lookup, defaults, dotted class paths and suggestions."""

import pytest

from ipuflow.config import ConfigurationError, Params, Registrable


def make_base(default=None):
    class Base(Registrable):
        default_implementation = default

    return Base


def test_duplicate_names_are_errors_unless_exist_ok():
    Base = make_base()

    @Base.register("a")
    class A(Base):
        pass

    with pytest.raises(ConfigurationError, match="already in use"):
        Base.register("a")(type("A2", (Base,), {}))

    @Base.register("a", exist_ok=True)
    class A3(Base):
        pass

    assert Base.by_name("a") is A3


def test_list_available_puts_the_default_first_and_checks_it():
    Base = make_base(default="b")
    Base.register("a")(type("A", (Base,), {}))
    Base.register("b")(type("B", (Base,), {}))
    Base.register("c")(type("C", (Base,), {}))
    assert Base.list_available() == ["b", "a", "c"]
    Broken = make_base(default="missing")
    Broken.register("x")(type("X", (Broken,), {}))
    with pytest.raises(ConfigurationError, match="not registered"):
        Broken.list_available()


def test_namespaces_are_separate_per_base():
    First, Second = make_base(), make_base()
    First.register("same")(type("F", (First,), {}))
    Second.register("same")(type("S", (Second,), {}))
    assert First.by_name("same").__name__ == "F"
    assert Second.by_name("same").__name__ == "S"


def test_unknown_name_suggests_the_closest_and_mentions_include_package():
    Base = make_base()
    Base.register("sequence_tagging")(type("T", (Base,), {}))
    with pytest.raises(ConfigurationError) as error:
        Base.by_name("sequence-tagging")
    assert "Did you mean 'sequence_tagging'?" in str(error.value)
    assert "--include-package" in str(error.value)
    with pytest.raises(ConfigurationError, match="Did you mean 'sequence_tagging'"):
        Base.by_name("sequence_tgaging")


def test_dotted_names_import_unregistered_classes():
    Base = make_base()
    Base.register("x")(type("X", (Base,), {}))
    built = Base.from_params(Params({"type": "collections.OrderedDict"}))
    assert type(built).__name__ == "OrderedDict"
    with pytest.raises(ConfigurationError, match="cannot be imported"):
        Base.by_name("no_such_module_xyz.Thing")
    with pytest.raises(ConfigurationError, match="has no 'Nope'"):
        Base.by_name("collections.Nope")


def test_a_registered_constructor_is_inspected_and_called_instead_of_init():
    Base = make_base()

    @Base.register("parts", constructor="from_parts")
    class Parts(Base):
        def __init__(self, total: int) -> None:
            self.total = total

        @classmethod
        def from_parts(cls, a: int, b: int) -> "Parts":
            return cls(a + b)

    built = Base.from_params(Params({"type": "parts", "a": 2, "b": 3}))
    assert built.total == 5
    with pytest.raises(ConfigurationError, match="total: unknown key"):
        Base.from_params(Params({"type": "parts", "total": 2}))


def test_type_is_required_without_a_default_and_defaulted_with_one():
    NoDefault = make_base()
    NoDefault.register("a")(type("A", (NoDefault,), {}))
    with pytest.raises(ConfigurationError, match="required key 'type' is missing; choose one of: a"):
        NoDefault.from_params(Params({}))
    WithDefault = make_base(default="a")
    WithDefault.register("a")(type("A", (WithDefault,), {}))
    assert type(WithDefault.from_params(Params({}))).__name__ == "A"


def test_a_base_with_nothing_registered_explains_include_package():
    class Lonely(Registrable):
        pass

    with pytest.raises(ConfigurationError, match="--include-package"):
        Lonely.from_params(Params({}))


def test_type_on_a_concrete_class_is_an_unknown_key():
    Base = make_base()

    @Base.register("a")
    class A(Base):
        def __init__(self, x: int = 1) -> None:
            self.x = x

    with pytest.raises(ConfigurationError, match="type: unknown key for A"):
        A.from_params(Params({"type": "a"}))
