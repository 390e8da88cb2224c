"""`-s` into a place that cannot be created is a usage error naming the flag (issue 36, point 7),
not a raw FileNotFoundError with exit code 1."""

import json
import os

import pytest

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no directory can be made")
def test_a_serialization_dir_that_cannot_be_created_names_the_flag(tiny_data, tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(tiny_config(tiny_data, num_epochs=1)))
    assert run(["train", str(config), "-s", "/proc/ipuflow_run"]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "-s/--serialization-dir" in message and "/proc/ipuflow_run cannot be created" in message
    assert "Traceback" not in message and "Errno" not in message
