"""Issue 23.8: with dropout, one process with `replication_factor: 2` and `torchrun --nproc_per_node 2`
end with the same weights, because the one-process run draws replica r's random numbers from the
stream rank r draws."""

import json

import pytest

from tests.conftest import ROOT
from tests.distributed.conftest import load_weights, max_difference, single_process, torchrun


def digits_config(path, **executor):
    """configs/digits_mlp.jsonnet (dropout 0.1), 2 epochs, 2 replicas on the CPU."""
    overrides = {"trainer.num_epochs": 2, "trainer.executor.device": "cpu", "trainer.executor.replication_factor": 2,
                 "evaluate_on_test": False}
    overrides.update({f"trainer.executor.{key}": value for key, value in executor.items()})
    path.write_text(json.dumps(overrides))
    return path


@pytest.mark.slow  # one torchrun run of the digits config: about a minute on 2 cores
def test_one_process_with_two_replicas_and_dropout_trains_as_torchrun(tmp_path):
    config = str(ROOT / "configs" / "digits_mlp.jsonnet")
    overrides = digits_config(tmp_path / "overrides.json").read_text()
    one, two = tmp_path / "one", tmp_path / "two"
    assert single_process(["train", config, "-s", str(one), "-o", overrides]) == 0
    done, _ = torchrun(["train", config, "-s", str(two), "-o", overrides])
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("model_state_e1_b0.safetensors", "model_state_e2_b0.safetensors"):
        assert max_difference(load_weights(one / name), load_weights(two / name)) <= 1e-6, name


def test_a_resumed_one_process_replicated_run_continues_every_replica_stream(tmp_path):
    import safetensors.torch
    import torch

    from tests.training.test_trainer import build

    config = {"num_epochs": 2, "optimizer": {"type": "adam", "lr": 0.01},
              "executor": {"type": "native", "replication_factor": 2}, "checkpointer": {"keep_most_recent_by_count": None}}
    build(tmp_path / "whole", config, dropout=0.3, batch_size=2).train()
    build(tmp_path / "resumed", {**config, "max_steps": 3}, dropout=0.3, batch_size=2).train()
    state = torch.load(tmp_path / "resumed" / "training_state_e0_b3.pt", weights_only=True)
    assert len(state["executor"]["replica_rng"]) == 2  # replica 1's stream travels with the checkpoint
    torch.manual_seed(1234)  # a fresh process starts from other states
    build(tmp_path / "resumed", config, seed=99, dropout=0.3, batch_size=2).train()
    whole = safetensors.torch.load_file(str(tmp_path / "whole" / "model_state_e2_b0.safetensors"))
    resumed = safetensors.torch.load_file(str(tmp_path / "resumed" / "model_state_e2_b0.safetensors"))
    assert all(torch.equal(whole[key], resumed[key]) for key in whole)
