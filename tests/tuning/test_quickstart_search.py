"""The real search the issue asks for: 12 trials over the quickstart's learning rate and dropout."""

import json

import pytest

from ipuflow.commands.cli import run

from tests.conftest import ROOT

SHIPPED_BEST_VALIDATION_ACCURACY = 0.7366
"""configs/quickstart.jsonnet as shipped (8 epochs, lr 0.005, dropout 0.5): README's table."""


@pytest.mark.slow
def test_a_search_over_the_quickstart_finds_a_config_at_least_as_good_as_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config's data paths are relative to the repository root
    directory = tmp_path / "search"
    code = run(["tune", "configs/quickstart.jsonnet", "configs/quickstart_search.jsonnet", "-s", str(directory),
                "-o", '{"trainer.num_epochs": 4, "evaluate_on_test": false}'])
    assert code == 0
    rows = json.loads((directory / "trials.json").read_text())
    assert len([row for row in rows if row["state"] in ("COMPLETE", "PRUNED")]) == 12
    best = json.loads((directory / "best_trial.json").read_text())
    assert best["value"] >= SHIPPED_BEST_VALIDATION_ACCURACY, best
    best_config = json.loads((directory / "best_config.json").read_text())
    assert best_config["trainer"]["optimizer"]["lr"] == pytest.approx(best["params"]["trainer.optimizer.lr"])
