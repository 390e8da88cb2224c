"""Params: loading Jsonnet/JSON/YAML, external variables, overrides, and the reading API."""

import json

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.params import with_overrides


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_jsonnet_with_locals_and_comments(tmp_path):
    path = write(tmp_path, "c.jsonnet", """
        // a comment
        local lr = 0.1;
        {trainer: {optimizer: {lr: lr * 2}}, name: "x" + "y"}
    """)
    params = Params.from_file(path)
    assert params.as_dict() == {"trainer": {"optimizer": {"lr": 0.2}}, "name": "xy"}


def test_reads_json_and_yaml(tmp_path):
    assert Params.from_file(write(tmp_path, "c.json", '{"a": [1, 2]}')).as_dict() == {"a": [1, 2]}
    assert Params.from_file(write(tmp_path, "c.yaml", "a:\n  b: 3\n")).as_dict() == {"a": {"b": 3}}
    assert Params.from_file(write(tmp_path, "c.yml", "a: true\n")).as_dict() == {"a": True}


def test_environment_variables_are_external_variables_and_explicit_ones_win(tmp_path, monkeypatch):
    path = write(tmp_path, "c.jsonnet", '{data: std.extVar("DATA_DIR"), n: std.parseInt(std.extVar("N"))}')
    monkeypatch.setenv("DATA_DIR", "/from/env")
    monkeypatch.setenv("N", "3")
    assert Params.from_file(path).as_dict() == {"data": "/from/env", "n": 3}
    assert Params.from_file(path, ext_vars={"DATA_DIR": "/explicit"})["data"] == "/explicit"


def test_unset_external_variable_names_the_variable_and_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("IPUFLOW_TEST_UNSET", raising=False)
    path = write(tmp_path, "c.jsonnet", '{data: std.extVar("IPUFLOW_TEST_UNSET")}')
    with pytest.raises(ConfigurationError) as error:
        Params.from_file(path)
    assert "IPUFLOW_TEST_UNSET" in str(error.value) and "c.jsonnet" in str(error.value)


def test_missing_file_and_bad_jsonnet_are_configuration_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        Params.from_file(tmp_path / "nope.jsonnet")
    with pytest.raises(ConfigurationError, match="not valid Jsonnet"):
        Params.from_file(write(tmp_path, "bad.jsonnet", "{a: }"))


def test_overrides_from_file_can_use_ext_vars(tmp_path):
    path = write(tmp_path, "c.jsonnet", '{trainer: {num_epochs: 1, lr: 2}}')
    params = Params.from_file(path, overrides='{"trainer.num_epochs": std.parseInt(std.extVar("E"))}', ext_vars={"E": "7"})
    assert params.as_dict() == {"trainer": {"num_epochs": 7, "lr": 2}}


ORIGINAL = {"model": {"type": "a", "x": 1, "inner": {"k": 2}}, "lst": ["a", {"k": 1}], "n": 5}


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"model.x": 9}, {"model": {"type": "a", "x": 9, "inner": {"k": 2}}, "lst": ["a", {"k": 1}], "n": 5}),
        # A nested object merges into the config, key by key, like the dotted key it spells out.
        ({"model": {"x": 9}}, {"model": {"type": "a", "x": 9, "inner": {"k": 2}}, "lst": ["a", {"k": 1}], "n": 5}),
        ({"model": {"inner": {"k": 3}}}, {"model": {"type": "a", "x": 1, "inner": {"k": 3}}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"model": {"inner.k": 3}}, {"model": {"type": "a", "x": 1, "inner": {"k": 3}}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"model": {"type": "b"}}, {"model": {"type": "b", "x": 1, "inner": {"k": 2}}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"lst.0": "d"}, {"model": ORIGINAL["model"], "lst": ["d", {"k": 1}], "n": 5}),
        ({"lst.1.k": 4}, {"model": ORIGINAL["model"], "lst": ["a", {"k": 4}], "n": 5}),
        ({"lst": {"1": {"k": 4}}}, {"model": ORIGINAL["model"], "lst": ["a", {"k": 4}], "n": 5}),
        ({"lst": ["z"]}, {"model": ORIGINAL["model"], "lst": ["z"], "n": 5}),  # a list replaces a list
        ({"new": 1}, {**ORIGINAL, "new": 1}),
        ({"model.new": 1}, {"model": {**ORIGINAL["model"], "new": 1}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"model.sub.z": 1}, {"model": {**ORIGINAL["model"], "sub": {"z": 1}}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"model": {"type": "b"}, "model.y": 2}, {"model": {**ORIGINAL["model"], "type": "b", "y": 2}, "lst": ORIGINAL["lst"], "n": 5}),
        ({"model": None}, {"model": None, "lst": ORIGINAL["lst"], "n": 5}),
    ],
)
def test_override_semantics(overrides, expected):
    assert with_overrides(ORIGINAL, overrides) == expected


def test_nested_and_dotted_overrides_are_the_same_edit():
    config = {"trainer": {"num_epochs": 8, "patience": 3, "optimizer": {"type": "adam", "lr": 0.1}}}
    nested = with_overrides(config, {"trainer": {"num_epochs": 2, "optimizer": {"lr": 0.5}}})
    dotted = with_overrides(config, {"trainer.num_epochs": 2, "trainer.optimizer.lr": 0.5})
    assert nested == dotted == {"trainer": {"num_epochs": 2, "patience": 3, "optimizer": {"type": "adam", "lr": 0.5}}}


def test_several_overrides_apply_in_order_and_null_then_an_object_replaces_a_block(tmp_path):
    path = write(tmp_path, "c.json", json.dumps({"model": {"type": "a", "x": 1}, "trainer": {"num_epochs": 8, "patience": 3}}))
    params = Params.from_file(path, overrides=['{"trainer.num_epochs": 2}', '{"trainer": {"patience": 1}}',
                                               '{"trainer.num_epochs": 3}', '{"model": null}', '{"model": {"type": "b"}}'])
    assert params.as_dict() == {"model": {"type": "b"}, "trainer": {"num_epochs": 3, "patience": 1}}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"n.x": 2}, "'n'"),
        ({"lst.7": 1}, "lst.7"),
        ({"lst": {"first": 1}}, "lst.first"),
        ({"model": {"inner": {"k": {"deep": 1}}}, "model.inner.k": 1}, "model.inner.k"),
    ],
)
def test_bad_override_paths_are_errors_naming_the_path(overrides, message):
    with pytest.raises(ConfigurationError) as error:
        with_overrides(ORIGINAL, overrides)
    assert message in str(error.value)


def test_item_access_edits_the_params_in_place():
    params = Params({"a": 1, "b": {"c": 2, "d": {"e": 3}}, "l": [{"f": 4}]})
    params["b"]["c"] = 99
    params["b"]["d"]["e"] = 100
    params["l"][0]["f"] = 101
    params.get("b")["g"] = 102
    assert params.as_dict() == {"a": 1, "b": {"c": 99, "d": {"e": 100}, "g": 102}, "l": [{"f": 101}]}
    assert params["b"].history == "b." and params["b"]["d"].history == "b.d."


def test_yaml_floats_in_exponent_notation_are_numbers(tmp_path):
    path = write(tmp_path, "c.yaml", "trainer:\n  optimizer:\n    lr: 1e-3\n    eps: 1E+8\n    wd: -2.5e-4\n"
                                     "    name: 1e-3x\n    quoted: '1e-3'\n    steps: 1_000\n")
    optimizer = Params.from_file(path).as_dict()["trainer"]["optimizer"]
    assert optimizer["lr"] == 1e-3 and isinstance(optimizer["lr"], float)
    assert optimizer["eps"] == 1e8 and optimizer["wd"] == -2.5e-4
    assert optimizer["name"] == "1e-3x" and optimizer["quoted"] == "1e-3"  # quoted stays a string


def test_pop_family_and_history():
    params = Params({"trainer": {"optimizer": {"lr": "0.5", "steps": "5", "on": "true", "kind": "adam"}}})
    optimizer = params.pop("trainer").pop("optimizer")
    assert optimizer.history == "trainer.optimizer."
    assert optimizer.pop_float("lr") == 0.5
    assert optimizer.pop_int("steps") == 5
    assert optimizer.pop_bool("on") is True
    assert optimizer.pop_choice("kind", ["sgd", "adam"]) == "adam"
    with pytest.raises(ConfigurationError, match="trainer.optimizer.missing: required key"):
        optimizer.pop("missing")
    assert optimizer.pop("missing", 3) == 3


def test_pop_coercions_reject_garbage():
    params = Params({"i": "five", "b": "True", "c": "sdg"})
    with pytest.raises(ConfigurationError, match="expected an integer"):
        params.pop_int("i")
    with pytest.raises(ConfigurationError, match="expected true or false"):
        params.pop_bool("b")
    with pytest.raises(ConfigurationError, match="Did you mean 'sgd'"):
        params.pop_choice("c", ["sgd", "adam"], allow_class_names=False)


def test_get_does_not_consume_and_assert_empty_names_leftovers():
    params = Params({"a": {"b": 1}})
    assert params.get("a")["b"] == 1
    assert "a" in params
    with pytest.raises(ConfigurationError, match="a: unknown key"):
        params.assert_empty("Thing")


def test_duplicate_is_independent_and_as_flat_dict_flattens_objects_only():
    params = Params({"a": 10, "b": {"c": 20, "d": "x", "e": [1, {"f": 2}]}})
    copy = params.duplicate()
    copy["b"]["c"] = 0
    assert params["b"]["c"] == 20
    assert params.as_flat_dict() == {"a": 10, "b.c": 20, "b.d": "x", "b.e": [1, {"f": 2}]}


def test_to_file_writes_readable_ordered_json(tmp_path):
    params = Params({"trainer": {"type": "x", "b": 1, "a": 2}, "model": {"z": 1, "type": "m"}, "dataset_reader": {}})
    params.to_file(tmp_path / "config.json")
    text = (tmp_path / "config.json").read_text()
    assert json.loads(text) == params.as_dict()
    assert list(json.loads(text)) == ["dataset_reader", "model", "trainer"]
    assert list(json.loads(text)["trainer"]) == ["type", "a", "b"]
    assert "\n  " in text


def test_popping_logs_the_key_path(caplog):
    import logging

    caplog.set_level(logging.INFO, logger="ipuflow.config")
    Params({"trainer": {"lr": 0.1}}).pop("trainer").pop("lr")
    assert "trainer.lr = 0.1" in caplog.text


def test_an_object_replaces_a_data_path_instead_of_taking_it_for_a_type():
    config = {"validation_data_path": "valid.jsonl", "model": "basic_classifier"}
    merged = with_overrides(config, {"validation_data_path": {"clean": "a.jsonl"}, "model": {"dropout": 0.1}})
    assert merged["validation_data_path"] == {"clean": "a.jsonl"}
    assert merged["model"] == {"type": "basic_classifier", "dropout": 0.1}  # a component's bare name is still its type
