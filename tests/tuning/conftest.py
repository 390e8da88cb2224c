"""The tiny sentiment task of tests/experiment as a config file, for searches that finish in seconds."""

import json

import pytest

from tests.experiment.conftest import tiny_config, write_tiny_data


@pytest.fixture(scope="session")
def tune_config_file(tmp_path_factory):
    data_dir = write_tiny_data(tmp_path_factory.mktemp("tune_data"))
    config = tiny_config(data_dir, num_epochs=3)
    config["evaluate_on_test"] = False
    config["model"]["dropout"] = 0.1
    path = data_dir / "config.json"
    path.write_text(json.dumps(config))
    return path


def write_search(path, **settings):
    search = {
        "parameters": {
            "trainer.optimizer.lr": {"type": "float", "low": 0.01, "high": 0.3, "log": True},
            "model.dropout": {"type": "float", "low": 0.0, "high": 0.5},
        },
        "sampler": {"type": "tpe", "seed": 0},
        "pruner": "none",
        **settings,
    }
    path.write_text(json.dumps(search))
    return path
