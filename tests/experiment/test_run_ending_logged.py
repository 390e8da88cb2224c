"""out.log says why each command on a run ended: completed (and why training stopped), interrupted,
or the error paragraph the terminal showed (issue 26.5)."""

import json

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config


def test_out_log_records_a_completed_run_and_why_training_stopped(tiny_data, tmp_path, capsys):
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(tiny_config(tiny_data, num_epochs=1)))
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 0
    last = (run_dir / "out.log").read_text().splitlines()[-1]
    assert "Run ended: complete" in last and "after the configured 1 epochs" in last and "archived" in last


def test_out_log_records_the_error_that_ended_a_command(tiny_data, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl"):
        (data / name).write_bytes((tiny_data / name).read_bytes())
    config_file = tmp_path / "c.json"
    config_file.write_text(json.dumps(tiny_config(data, num_epochs=1)))
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 0
    capsys.readouterr()
    (data / "train.jsonl").write_text("not json\n")
    assert run(["train", str(config_file), "-s", str(run_dir), "-r", "-o", '{"trainer.num_epochs": 2}']) == 2
    printed = " ".join(capsys.readouterr().err.split())
    log = (run_dir / "out.log").read_text()
    ending = log[log.rindex("Run ended"):]
    assert ending.startswith("Run ended with an error:")
    assert "train.jsonl:1" in ending and " ".join(ending.split()).split("error: ", 1)[1] in printed
