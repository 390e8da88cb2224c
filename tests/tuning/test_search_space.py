"""SEARCH files: every mistake is an error naming the key, reported before any trial runs."""

import json

import pytest

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError
from ipuflow.tuning.search_space import SearchSpec

from tests.tuning.conftest import write_search


def spec(parameters, **settings):
    return SearchSpec.from_dict({"parameters": parameters, **settings})


def test_distributions_parse_with_their_options():
    parsed = spec({
        "trainer.optimizer.lr": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True},
        "model.dropout": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
        "trainer.num_epochs": {"type": "int", "low": 1, "high": 4},
        "model.encoder": {"type": "categorical", "choices": [{"type": "bag_of_embeddings"}, {"type": "cnn"}]},
    }, n_trials=5, metric="-loss", pruner={"type": "median", "n_warmup_steps": 2})
    assert parsed.parameters["trainer.optimizer.lr"].log
    assert parsed.parameters["trainer.num_epochs"].low == 1 and isinstance(parsed.parameters["trainer.num_epochs"].high, int)
    assert parsed.parameters["model.encoder"].choices[1] == {"type": "cnn"}
    assert parsed.pruner == {"type": "median", "n_warmup_steps": 2} and parsed.sampler == {"type": "tpe"}


@pytest.mark.parametrize("parameters, settings, expected", [
    ({"model.dropout": {"type": "float", "low": 0.6, "high": 0.1}}, {}, "parameters.model.dropout: low (0.6) is greater than high (0.1)"),
    ({"data_loader.batch_size": {"type": "categorical"}}, {}, "parameters.data_loader.batch_size.choices"),
    ({"data_loader.batch_size": {"type": "categorical", "choices": []}}, {}, "non-empty list of choices"),
    ({"model.dropout": {"type": "uniform", "low": 0, "high": 1}}, {}, "parameters.model.dropout.type"),
    ({"trainer.optimizer.lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}, {}, "log-scaled distribution needs low > 0"),
    ({"trainer.num_epochs": {"type": "int", "low": 1.5, "high": 4}}, {}, "parameters.trainer.num_epochs.low: expected an integer"),
    ({"model.dropout": {"type": "float", "low": 0, "high": 1, "steps": 0.1}}, {}, "unknown key 'steps'"),
    ({"model.dropout": {"type": "float", "low": 0, "high": 1}}, {"n_trial": 3}, "unknown key 'n_trial'"),
    ({"model.dropout": {"type": "float", "low": 0, "high": 1}}, {"direction": "up"}, "direction"),
    ({"model.dropout": {"type": "float", "low": 0, "high": 1}}, {"pruner": "medain"}, "Did you mean 'median'"),
    ({"model.dropout": {"type": "float", "low": 0, "high": 1}}, {"metric": "accuracy"}, "metric"),
])
def test_bad_specs_are_errors_naming_the_key(parameters, settings, expected):
    with pytest.raises(ConfigurationError) as error:
        spec(parameters, **settings)
    assert expected in str(error.value)


def tune(config, search, directory, *extra):
    return run(["tune", str(config), str(search), "-s", str(directory), *extra])


@pytest.mark.parametrize("parameters, expected", [
    ({"trainer.optimiser.lr": {"type": "float", "low": 0.01, "high": 0.1}}, "trainer.optimiser.lr"),
    ({"model.dropot": {"type": "float", "low": 0.0, "high": 0.5}}, "model.dropot"),
])
def test_an_unknown_config_key_path_fails_before_any_trial(tune_config_file, tmp_path, capsys, parameters, expected):
    search = write_search(tmp_path / "search.json", parameters=parameters, n_trials=2)
    assert tune(tune_config_file, search, tmp_path / "runs") == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("trial_*"))


def test_bad_sampler_arguments_and_contradicting_direction_fail_before_any_trial(tune_config_file, tmp_path, capsys):
    search = write_search(tmp_path / "search.json", sampler={"type": "tpe", "sed": 1})
    assert tune(tune_config_file, search, tmp_path / "a") == 2
    assert "sampler 'tpe'" in capsys.readouterr().err
    search = write_search(tmp_path / "search.json", direction="minimize")  # the config's metric is +accuracy
    assert tune(tune_config_file, search, tmp_path / "b") == 2
    assert "contradicts the metric '+accuracy'" in capsys.readouterr().err
    assert not list(tmp_path.glob("*/trial_*"))


def test_a_key_both_searched_and_overridden_is_an_error(tune_config_file, tmp_path, capsys):
    search = write_search(tmp_path / "search.json")
    assert tune(tune_config_file, search, tmp_path / "runs", "-o", json.dumps({"model.dropout": 0.2})) == 2
    assert "'model.dropout' is both searched" in capsys.readouterr().err


def test_tune_help_documents_the_search_format(capsys):
    assert run(["tune", "--help"]) == 0
    out = capsys.readouterr().out
    for text in ("parameters", '"type": "categorical"', "n_trials", "pruner", "sampler", "-r, --resume", "--n-trials",
                 "--timeout", "--include-package", "best_config.json"):
        assert text in out
