"""In one process: how a combined batch's rows map to replicas (ranks), and the checks a torchrun
launch makes before anything is read."""

from __future__ import annotations

import numpy
import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.data.loader import FixedShapeDataLoader
from ipuflow.distributed.launch import check_config_for_launch
from ipuflow.distributed.process_group import DistributedContext, choose_backend, rank_device
from ipuflow.distributed.replicas import replicated_options

TORCHRUN_ENVIRONMENT = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}


def _instances(count):
    return [{"tokens": list(range(1, 2 + index % 7)), "label": index} for index in range(count)]


def _loaders(count, replicas, **settings):
    whole = FixedShapeDataLoader(_instances(count), batch_size=2, **settings)
    whole.set_batch_size_factor(2 * 2 * replicas)  # device iterations 2, accumulation 2
    parts = []
    for replica in range(replicas):
        part = FixedShapeDataLoader(_instances(count), batch_size=2, **settings)
        part.set_batch_size_factor(2 * 2 * replicas)
        part.select_replica(replica, replicas)
        parts.append(part)
    return whole, parts


@pytest.mark.parametrize("settings", [{"shuffle": True}, {"pad_on_batch_axis": True}, {"length_buckets": [2, 4, 8]},
                                      {"length_buckets": [2, 4, 8], "pad_on_batch_axis": True, "num_workers": 1}])
def test_the_replicas_rows_are_the_combined_batch_split_in_poptorch_order(settings):
    whole, parts = _loaders(37, 2, **settings)
    assert all(len(part) == len(whole) for part in parts)
    for combined, *replicas in zip(whole, *parts):
        # [device_iteration × accumulation][replica][micro_batch]: view each replica's rows that way.
        for key, value in combined.items():
            split = value.view(4, 2, 2, *value.shape[1:])
            for replica, rows in enumerate(replicas):
                assert torch.equal(rows[key], split[:, replica].reshape(-1, *value.shape[1:])), key


def test_padding_rows_stay_padding_in_every_replica():
    whole, parts = _loaders(20, 2, pad_on_batch_axis=True)  # 16 + 4 real rows in the last batch of 16
    last = [list(part)[-1]["label"] for part in parts]
    assert sorted(int(label) for rows in last for label in rows if label >= 0) == sorted(
        int(label) for label in list(whole)[-1]["label"] if label >= 0)
    assert sum(int((rows == -100).sum()) for rows in last) == 12


def test_a_short_unpadded_batch_cannot_be_split():
    _, parts = _loaders(20, 2, drop_last=False)
    with pytest.raises(ValueError, match="cannot be split among 2 replicas"), pytest.warns(UserWarning):
        list(parts[0])


def test_the_world_size_is_the_replication_factor():
    assert replicated_options({}, 4)["replication_factor"] == 4
    assert replicated_options({"replication_factor": 1, "inference_replication_factor": 4}, 4)["inference_replication_factor"] == 4
    with pytest.raises(ConfigurationError, match="trainer.executor.replication_factor: 3 replicas .* started 2 processes"):
        replicated_options({"replication_factor": 3}, 2)


def test_the_launch_refuses_what_cannot_run_as_replicas():
    def check(executor):
        return check_config_for_launch(Params({"trainer": {"executor": executor}}), 2)

    assert check({"replication_factor": 2, "device": "cpu"})["replication_factor"] == 2
    with pytest.raises(ConfigurationError, match="trainer.executor.type: 'poptorch' cannot run under torchrun"):
        check({"type": "poptorch"})
    with pytest.raises(ConfigurationError, match="trainer.executor.device: 'cuda:1' would put every rank"):
        check({"device": "cuda:1"})
    with pytest.raises(ConfigurationError, match="trainer.executor.sharding"):
        check({"sharding": "zero3"})
    with pytest.raises(ConfigurationError, match="trainer.executor.distributed_backend"):
        check({"distributed_backend": "mpi"})
    assert choose_backend("auto", uses_cuda=False) == "gloo" and choose_backend("auto", uses_cuda=True) == "nccl"
    with pytest.raises(ConfigurationError, match="'nccl' needs the executor on CUDA"):
        choose_backend("nccl", uses_cuda=False)


@pytest.mark.parametrize("command", [["evaluate", "run/model.tar.gz", "data.jsonl"], ["predict", "run/model.tar.gz", "-"]])
def test_evaluate_and_predict_refuse_torchrun(command, monkeypatch, capsys):
    from ipuflow.commands.cli import run

    for name, value in {**TORCHRUN_ENVIRONMENT, "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert run(command) == 2
    # The message is wrapped to the terminal's width: compare it with its lines joined.
    printed = " ".join(capsys.readouterr().err.split())
    assert f"ipuflow {command[0]} does not run under torchrun (only `ipuflow train` does)" in printed


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_more_gloo_ranks_than_gpus_is_a_configuration_error(device, monkeypatch):
    # Two processes on a one-GPU machine: rank 1's cuda:1 does not exist (CUDA's own error was
    # "invalid device ordinal", raised on the first tensor moved there).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    context = DistributedContext(rank=1, world_size=2, local_rank=1, backend="gloo", device=torch.device("cpu"))
    with pytest.raises(ConfigurationError, match=r"trainer.executor.device: .* local rank 1, but this machine has 1 CUDA device: "
                                                 r"start at most one process per GPU .* trainer.executor.device: 'cpu'"):
        rank_device(device, context)
    assert rank_device("cpu", context) == torch.device("cpu")
    first = DistributedContext(rank=0, world_size=2, local_rank=0, backend="gloo", device=torch.device("cpu"))
    assert rank_device(device, first) == torch.device("cuda", 0)


def test_other_ranks_keep_a_configuration_error_to_themselves(monkeypatch, capsys):
    from ipuflow.commands.cli import run

    for name, value in TORCHRUN_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    assert run(["evaluate", "run/model.tar.gz", "data.jsonl"]) == 2
    assert capsys.readouterr().err == ""


def test_positions_follow_the_split_order():
    from ipuflow.distributed.replicas import replica_positions

    assert replica_positions(2, 2, 1, 8).tolist() == [2, 3, 6, 7]
    assert numpy.array_equal(replica_positions(1, 3, 0, 6), [0, 3])


@pytest.mark.parametrize("flag", ["--dry-run", "--compile-only"])
def test_dry_run_and_compile_only_refuse_torchrun(flag, task, tmp_path, monkeypatch, capsys):
    from ipuflow.commands.cli import run
    from tests.distributed.conftest import task_config

    config = task_config(task, tmp_path / "config.json", {})
    for name, value in {**TORCHRUN_ENVIRONMENT, "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert run(["train", str(config), "-s", str(tmp_path / "run"), flag]) == 2
    assert f"ipuflow train {flag} does not run under torchrun" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
