"""`-r` resumes a torchrun run exactly: every rank gets its own random-number streams (dropout
differs per replica) and its own rows' metric state back, so the weights and metrics equal those
of a run that was never stopped."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.distributed.conftest import load_weights, max_difference, read_json, task_config, torchrun


def _training_and_validation(metrics):
    return {key: value for key, value in metrics.items() if key.startswith(("training_", "validation_"))
            and not key.endswith("duration")}


@pytest.mark.slow  # three torchrun runs: about a minute on 2 cores
def test_a_resumed_torchrun_run_ends_as_an_uninterrupted_one(task, tmp_path):
    executor = {"replication_factor": 2, "output_mode": "all"}
    config = task_config(task, tmp_path / "config.json", executor)
    data = json.loads(config.read_text())
    data["model"]["dropout"] = 0.3
    config.write_text(json.dumps(data))
    stopped = tmp_path / "stopped.json"
    data["trainer"]["max_steps"] = 4  # stops 4 host calls into the first epoch of 6
    stopped.write_text(json.dumps(data))

    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    done, _ = torchrun(["train", str(config), "-s", str(whole)])
    assert done.returncode == 0, done.stderr[-3000:]
    done, _ = torchrun(["train", str(stopped), "-s", str(resumed)])
    assert done.returncode == 0, done.stderr[-3000:]
    state = torch.load(resumed / "training_state_e0_b4.pt", weights_only=True)
    assert len(state["ranks"]) == 2  # each rank's own random-number and metric state
    assert not torch.equal(state["ranks"][0]["rng"]["torch"], state["ranks"][1]["rng"]["torch"])
    done, _ = torchrun(["train", str(config), "-s", str(resumed), "-r"])
    assert done.returncode == 0, done.stderr[-3000:]

    assert max_difference(load_weights(whole / "model_state_e2_b0.safetensors"),
                          load_weights(resumed / "model_state_e2_b0.safetensors")) == 0.0
    for name in ("metrics_epoch_0.json", "metrics_epoch_1.json"):
        expected = _training_and_validation(read_json(whole / name))
        found = _training_and_validation(read_json(resumed / name))
        assert expected.keys() == found.keys() and "training_accuracy" in found
        for key, value in expected.items():
            assert math.isclose(value, found[key], rel_tol=1e-9), (name, key, value, found[key])
