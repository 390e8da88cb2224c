"""Every bad config value is reported with its full key path, as `ipuflow train` and `evaluate` print it.

A section's constructor names its keys relative to itself; the resolver prefixes where the section
sits in this config (`validation_data_loader.`, `trainer.learning_rate_scheduler.schedulers.0.1.`,
`model.metrics.f1.`). Each error is one paragraph on stderr, exit code 2, and no traceback.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipuflow.commands.cli import run

REPOSITORY = Path(__file__).resolve().parents[2]

CASES = [
    # validation_data_loader.*
    ({"validation_data_loader": {"batch_size": 0}}, "validation_data_loader.batch_size: expected an int >= 1, found"),
    ({"validation_data_loader": {"batch_size": 2, "length_buckets": [4, 0]}},
     "validation_data_loader.length_buckets.1: expected an int >= 1, found"),
    ({"validation_data_loader": {"batch_size": 2, "max_length": 4, "length_buckets": [4]}},
     "validation_data_loader.length_buckets: give either max_length or length_buckets"),
    ({"validation_data_loader": {"batch_size": 2, "num_workers": -1}},
     "validation_data_loader.num_workers: expected an int >= 0, found"),
    # trainer.optimizer.*
    ({"trainer.optimizer.lr": -1}, "trainer.optimizer.lr: expected a number >= 0, found"),
    ({"trainer.optimizer": {"type": "sgd", "lr": 0.1, "momentum": -1}}, "trainer.optimizer.momentum: expected a number >= 0"),
    ({"trainer.optimizer": {"type": "adam", "lr": 0.1, "betas": [1.5, 0.9]}},
     "trainer.optimizer.betas.0: expected a number >= 0 and < 1, found"),
    ({"trainer.optimizer.parameter_groups": [[["embed"], {"lr": -1}]]},
     "trainer.optimizer.parameter_groups.0.1.lr: expected a number >= 0, found"),
    # trainer.executor.* and the trainer's other sections
    ({"trainer.executor": {"device_iterations": 0}}, "trainer.executor.device_iterations: expected an int >= 1, found"),
    ({"trainer.executor": {"output_mode": "most"}}, "trainer.executor.output_mode: expected one of"),
    ({"trainer.executor": {"output_mode": "every_n", "output_period": 3, "device_iterations": 2}},
     "trainer.executor.output_period: output mode 'every_n' needs"),
    ({"trainer.learning_rate_scheduler": {"type": "combined", "schedulers": [[1, {"type": "cosine", "t_initial": 0}]]}},
     "trainer.learning_rate_scheduler.schedulers.0.1.t_initial: expected an int >= 1, found"),
    ({"trainer.checkpointer": {"keep_most_recent_by_count": -1}},
     "trainer.checkpointer.keep_most_recent_by_count: expected an int >= 0 or null, found"),
    # distributed options are checked in a single-process run too, not only under torchrun
    ({"trainer.executor.distributed_backend": "ncl"},
     "trainer.executor.distributed_backend: expected one of 'auto', 'gloo', 'nccl', found"),
    ({"trainer.executor.find_unused_parameters": "yes"}, "trainer.executor.find_unused_parameters: expected"),
    # the trainer's own keys, aliases of executor keys named by the spelling the config used
    ({"trainer.num_epochs": 0}, "trainer.num_epochs: expected an int >= 1, found"),
    ({"trainer.log_interval": 0.5}, "trainer.log_interval: expected an int"),
    ({"trainer.max_steps": -2}, "trainer.max_steps: expected an int >= 1 or null, found"),
    ({"trainer.num_gradient_accumulation_steps": 0}, "trainer.num_gradient_accumulation_steps: expected an int >= 1, found"),
    ({"trainer.grad_norm": -1.0}, "trainer.grad_norm: expected a finite number > 0, found"),
    ({"trainer.grad_norm": True}, "trainer.grad_norm: true (report the norm without clipping) is not supported"),
    ({"trainer": {"num_gradient_accumulation_steps": 2, "executor": {"gradient_accumulation": 3}}},
     "trainer.num_gradient_accumulation_steps: 2 is the same setting as executor.gradient_accumulation, which is 3"),
    # model.*
    ({"model.metrics": {"f1": {"type": "f1", "average": "most"}}}, "model.metrics.f1.average: expected one of"),
    ({"model.metrics": {"acc": {"type": "categorical_accuracy", "top_k": 0}}},
     "model.metrics.acc.top_k: expected an int >= 1, found"),
    ({"model.encoder": {"type": "lstm", "num_layers": 0, "hidden_size": 4}}, "model.encoder.num_layers: expected an int >= 1"),
    ({"model.encoder": {"type": "cnn", "ngram_filter_sizes": [2, 0], "num_filters": 2}},
     "model.encoder.ngram_filter_sizes.1: expected an int >= 1, found"),
    ({"model.dropout": 1.5}, "model.dropout: expected a probability (a number from 0 to 1), found"),
]


def error_paragraph(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("ipuflow: error:") or line.startswith("  ")]
    start = next(i for i, line in enumerate(lines) if line.startswith("ipuflow: error:"))
    return " ".join(" ".join(lines[start:]).split())


@pytest.mark.parametrize("overrides, expected", CASES, ids=[next(iter(case[0])) + "-" + str(i) for i, case in enumerate(CASES)])
def test_train_names_the_full_key_path(tiny_config_file, tmp_path, capsys, overrides, expected):
    code = run(["train", str(tiny_config_file), "-s", str(tmp_path / "run"), "--dry-run", "-o", json.dumps(overrides)])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert expected in error_paragraph(stderr), stderr


def test_evaluate_names_the_validation_loader_it_uses(trained_run, tiny_data, capsys):
    code = run(["evaluate", str(trained_run / "model.tar.gz"), str(tiny_data / "test.jsonl"),
                "-o", json.dumps({"validation_data_loader": {"batch_size": 2, "max_length": 0}})])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "validation_data_loader.max_length: expected an int >= 1 or null, found" in error_paragraph(stderr), stderr


def test_the_command_prints_one_paragraph_and_exits_2(tiny_config_file, tmp_path):
    """The real command line: one paragraph on stderr, exit 2, no traceback."""
    overrides = {"model.metrics": {"acc": {"type": "categorical_accuracy", "top_k": 0}}}
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    result = subprocess.run(
        [sys.executable, "-m", "ipuflow", "train", str(tiny_config_file), "-s", str(tmp_path / "run"), "--dry-run",
         "-o", json.dumps(overrides)],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    error = result.stderr[result.stderr.index("ipuflow: error:"):]
    assert "\n\n" not in error.strip()
    assert "model.metrics.acc.top_k: expected an int >= 1, found" in " ".join(error.split())
