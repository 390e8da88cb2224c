"""A run that fails in training before its first optimizer update leaves nothing that blocks the same
command (issue 36, point 3): the re-run was refused, "already exists and is not empty". What the
failed command created goes (a new run directory whole); what the directory held before stays.

The failure is injected in the first training step, as an out-of-memory error there would come.
"""

import json

import pytest

from ipuflow.commands.cli import run
from ipuflow.execution.native import NativeExecutor

from tests.experiment.conftest import tiny_config


@pytest.fixture
def failing_first_step(monkeypatch):
    def out_of_memory(self, batch, samples):
        raise RuntimeError("CPU out of memory (injected in the first training step)")

    monkeypatch.setattr(NativeExecutor, "_train", out_of_memory)
    return monkeypatch


def write_config(tmp_path, tiny_data):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(tiny_config(tiny_data, num_epochs=1)))
    return path


def test_a_new_run_directory_goes_when_the_first_update_fails(tiny_data, tmp_path, failing_first_step, capsys):
    config, run_dir = write_config(tmp_path, tiny_data), tmp_path / "runs" / "new"
    assert run(["train", str(config), "-s", str(run_dir)]) == 1
    assert "out of memory" in capsys.readouterr().err
    assert not run_dir.exists() and (tmp_path / "runs").is_dir()  # only what the command created goes
    failing_first_step.undo()
    assert run(["train", str(config), "-s", str(run_dir)]) == 0  # the same command, no --force
    assert (run_dir / "model.tar.gz").is_file()


def test_a_given_directory_keeps_what_it_held_when_the_first_update_fails(tiny_data, tmp_path, failing_first_step):
    config, run_dir = write_config(tmp_path, tiny_data), tmp_path / "given"
    run_dir.mkdir()
    assert run(["train", str(config), "-s", str(run_dir), "--force"]) == 1
    assert run_dir.is_dir() and [entry.name for entry in run_dir.iterdir() if entry.name != ".ipuflow.lock"] == []
    (run_dir / "notes.txt").write_text("mine")
    # a directory holding other files is refused as before, and keeps them
    assert run(["train", str(config), "-s", str(run_dir)]) == 2
    assert (run_dir / "notes.txt").read_text() == "mine"
