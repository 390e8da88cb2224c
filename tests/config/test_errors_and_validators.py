"""ConfigurationError's parts (key, path, expected, found), how the resolver locates them, and the validators."""

import pickle

import pytest

from ipuflow.config import ConfigurationError, FromParams, Lazy, Params, Registrable, validators


class Part(Registrable):
    """A family whose implementation checks its keys with the shared validators."""


@Part.register("checked")
class CheckedPart(Part):
    def __init__(self, size: int = 1, rate: float = 0.5, mode: str = "a") -> None:
        validators.positive_int("size", size)
        validators.probability("rate", rate)
        validators.choice("mode", mode, ("a", "b"))


class Holder(FromParams):
    def __init__(self, part: Lazy[Part] = Lazy(Part, {"type": "checked", "size": 0})) -> None:
        self.part = part


@pytest.mark.parametrize(
    "config, message",
    [
        ({"type": "checked", "size": 0}, "outer.parts.1.size: expected an int >= 1, found an integer (0)."),
        ({"type": "checked", "rate": 1.5}, "outer.parts.1.rate: expected a probability (a number from 0 to 1), found a number (1.5)."),
        ({"type": "checked", "mode": "c"}, "outer.parts.1.mode: expected one of 'a', 'b', found a string (\"c\")."),
    ],
)
def test_the_resolver_prefixes_where_the_section_sits(config, message):
    with pytest.raises(ConfigurationError) as error:
        Part.from_params(Params(config, history="outer.parts.1."))
    assert str(error.value) == message


def test_a_located_error_is_not_located_again():
    error = ConfigurationError(key="size", expected="an int >= 1", found=0)
    assert str(error) == "size: expected an int >= 1, found an integer (0)."
    error.locate("inner.").locate("outer.inner.")
    assert error.path == "inner.size" and str(error) == "inner.size: expected an int >= 1, found an integer (0)."
    assert error.explanation == "expected an int >= 1, found an integer (0)."


def test_an_error_about_the_section_itself_and_one_about_no_key():
    section = ConfigurationError("give exactly one of a and b.", key="").locate("model.")
    assert str(section) == "model: give exactly one of a and b."
    file_error = ConfigurationError("config.json: not valid JSON.").locate("model.")
    assert str(file_error) == "config.json: not valid JSON." and file_error.path is None


def test_a_defaulted_lazy_knows_its_key_path():
    holder = Holder.from_params(Params({}, history="trainer."))
    with pytest.raises(ConfigurationError, match=r"^trainer\.part\.size: expected an int >= 1"):
        holder.part.construct()


def test_the_error_survives_pickling_with_its_message():
    error = ConfigurationError(key="size", expected="an int >= 1", found=0).locate("a.")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


@pytest.mark.parametrize(
    "check, value, ok",
    [
        (lambda v: validators.positive_int("k", v), 1, True),
        (lambda v: validators.positive_int("k", v), 0, False),
        (lambda v: validators.positive_int("k", v), True, False),
        (lambda v: validators.positive_int("k", v), 1.0, False),
        (lambda v: validators.positive_int("k", v, optional=True), None, True),
        (lambda v: validators.non_negative_int("k", v), 0, True),
        (lambda v: validators.non_negative_int("k", v), -1, False),
        (lambda v: validators.positive_number("k", v), 0.1, True),
        (lambda v: validators.positive_number("k", v), float("inf"), False),
        (lambda v: validators.non_negative_number("k", v), 0, True),
        (lambda v: validators.non_negative_number("k", v), float("nan"), False),
        (lambda v: validators.probability("k", v), 1, True),
        (lambda v: validators.probability("k", v), 1.01, False),
        (lambda v: validators.fraction_below_one("k", v), 0.999, True),
        (lambda v: validators.fraction_below_one("k", v), 1.0, False),
        (lambda v: validators.choice("k", v, ("x",)), "x", True),
        (lambda v: validators.choice("k", v, ("x",)), "y", False),
        (lambda v: validators.boolean("k", v), 0, False),
        (lambda v: validators.optional_int("k", v), None, True),
        (lambda v: validators.positive_ints("k", v), [1, 2], True),
        (lambda v: validators.positive_ints("k", v), [], False),
    ],
)
def test_validators(check, value, ok):
    if ok:
        check(value)
        return
    with pytest.raises(ConfigurationError) as error:
        check(value)
    assert error.value.key == "k" and error.value.expected


def test_a_bad_item_of_a_list_is_named_by_its_index():
    with pytest.raises(ConfigurationError) as error:
        validators.positive_ints("buckets", [4, 0])
    assert error.value.key == "buckets.1"
