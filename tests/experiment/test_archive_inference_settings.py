"""An archive is data all the way down: evaluate, predict and export take only the settings inference
needs from its config, never ones about the machine (issue 22, item 4 and 7).

The probe: an archive's `trainer.executor.compile.options` went straight to `torch.compile` in
`evaluate` and `predict` (`{"cpp.cxx": ["/bin/bash"]}` ran bash, `trace.debug_dir` wrote where the
archive chose); its `dataset_reader.num_workers` started a hundred processes and its
`cache_directory` pointed the cache's pruning at a folder of runs.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.experiment.archive.archival import load_archive
from ipuflow.experiment.archive.settings import inference_settings

from tests.experiment.test_archive_security import repack


def hostile(config, tmp_path):
    config["trainer"]["executor"] = {
        "type": "native", "device": "cuda:7", "device_iterations": 1, "distributed_backend": "nccl",
        "compile": {"options": {"cpp.cxx": ["/bin/bash"], "trace.enabled": True, "trace.debug_dir": str(tmp_path / "chosen")}},
    }
    config["dataset_reader"]["num_workers"] = 100
    config["dataset_reader"]["cache_directory"] = str(tmp_path / "victim_runs")
    config["data_loader"]["num_workers"] = 50


@pytest.fixture
def compile_calls(monkeypatch):
    calls = []

    def recording_compile(module, **options):
        calls.append(options)
        return module

    monkeypatch.setattr(torch, "compile", recording_compile)
    return calls


def test_the_archive_settings_about_the_machine_are_dropped_with_a_note(caplog):
    raw = {"model": {"type": "m"}, "random_seed": 1, "distributed": {"cuda_devices": [0, 1]},
           "dataset_reader": {"type": "r", "num_workers": 9, "cache_directory": "/x", "tokenizer": {"type": "t"}},
           "data_loader": {"batch_size": 4, "num_workers": 3},
           "trainer": {"num_epochs": 3, "executor": {"type": "poptorch", "ipu_config": "ipu.json", "executable_cache_dir": "/tmp/e",
                                                      "layers_per_ipu": [2, 2], "gradient_accumulation": 4, "precision": "fp16"}}}
    with caplog.at_level(logging.INFO):
        kept = inference_settings(raw, "the archive a.tar.gz")
    assert kept == {"model": {"type": "m"}, "dataset_reader": {"type": "r", "tokenizer": {"type": "t"}},
                    "data_loader": {"batch_size": 4},
                    "trainer": {"executor": {"type": "poptorch", "ipu_config": "ipu.json", "layers_per_ipu": [2, 2],
                                                     "precision": "fp16"}}}
    note = " ".join(record.getMessage() for record in caplog.records)
    for key in ("dataset_reader.num_workers", "dataset_reader.cache_directory", "data_loader.num_workers",
                "trainer.executor.executable_cache_dir", "a.tar.gz"):
        assert key in note
    assert "gradient_accumulation" not in note  # training-only: dropped without a word


def test_evaluate_and_predict_never_hand_the_archives_compile_options_to_torch(trained_run, tiny_data, tmp_path,
                                                                               compile_calls, caplog, capsys,
                                                                               monkeypatch):
    monkeypatch.setenv("IPUFLOW_DATA_CACHE_DIR", str(tmp_path / "my_cache"))
    crafted = repack(trained_run, tmp_path, lambda config: hostile(config, tmp_path))
    victim = tmp_path / "victim_runs"
    with caplog.at_level(logging.INFO):
        assert run(["evaluate", str(crafted), str(tiny_data / "test.jsonl")]) == 0
        assert run(["predict", str(crafted), "-"]) is not None
    assert compile_calls == []
    assert not (tmp_path / "chosen").exists() and not victim.exists()
    note = " ".join(record.getMessage() for record in caplog.records)
    assert "trainer.executor.compile" in note and "trainer.executor.device" in note and "dataset_reader.num_workers" in note


def test_the_users_own_flags_still_set_what_the_archive_may_not(trained_run, tiny_data, tmp_path, compile_calls, capsys):
    crafted = repack(trained_run, tmp_path, lambda config: hostile(config, tmp_path))
    code = run(["evaluate", str(crafted), str(tiny_data / "test.jsonl"), "-o",
                json.dumps({"trainer.executor.compile": {"dynamic": False}}), "--device", "cpu"])
    assert code == 0 and compile_calls == [{"dynamic": False}]
    archive = load_archive(crafted, overrides={"dataset_reader.num_workers": 2})
    assert archive.dataset_reader._num_workers == 2
