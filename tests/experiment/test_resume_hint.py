"""The command a stopped run suggests for resuming works as printed (issue 26.2), and `-r` without
CONFIG continues with the config the run saved."""

import json
import re
import shlex

import pytest

from ipuflow.commands.cli import run

from tests.experiment.conftest import tiny_config
from tests.experiment.fault_injection import run_with_fault


@pytest.mark.slow  # a CLI process with a signal injected
def test_the_resume_command_printed_after_ctrl_c_works_with_the_runs_overrides(tiny_data, tmp_path):
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(tiny_config(tiny_data, num_epochs=2)))
    directory = tmp_path / "run"
    calls = "calls = []\n"
    result = run_with_fault(
        ["train", str(config_file), "-s", str(directory), "-o", '{"trainer.patience": 3}'],
        calls + """
def first_validation(*args, **kwargs):
    calls.append(1)
    if len(calls) == 1:
        os.kill(os.getpid(), signal.SIGINT)
inject("ipuflow.training.loop.validation", "score", before=first_validation)
""")
    assert result.returncode == 130, result.stderr[-2000:]  # 128 + SIGINT, as shells report Ctrl-C
    error = " ".join(result.stderr.split())
    assert "interrupted by SIGINT" in error, error[-2000:]
    ending = (directory / "out.log").read_text().splitlines()[-1]  # out.log says why the command ended
    assert "Run ended: interrupted. Training was interrupted by SIGINT" in ending
    hinted = re.findall(r"`(ipuflow train [^`]*)`", error)
    assert hinted, error[-2000:]
    command = shlex.split(hinted[-1])
    assert command[:2] == ["ipuflow", "train"] and "CONFIG" not in command
    assert run(command[1:]) == 0
    saved = json.loads((directory / "config.json").read_text())
    assert saved["trainer"]["patience"] == 3
    assert json.loads((directory / "metrics.json").read_text())["epoch"] == 1


def test_recover_without_config_reads_the_saved_one_and_takes_raised_limits(trained_run, tmp_path, capsys):
    import shutil

    directory = tmp_path / "copy"
    shutil.copytree(trained_run, directory)
    assert run(["train", "-s", str(directory), "-r", "-o", '{"trainer.num_epochs": 7}']) == 0
    assert json.loads((directory / "config.json").read_text())["trainer"]["num_epochs"] == 7


def test_config_can_be_left_out_only_with_recover(tmp_path, capsys):
    assert run(["train", "-s", str(tmp_path / "new")]) == 2
    assert "only -r can leave it out" in " ".join(capsys.readouterr().err.split())
    assert run(["train", "-s", str(tmp_path / "new"), "-r"]) == 2
    assert "holds no run to recover" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "new").exists()


def test_error_paragraphs_never_break_a_path_inside_a_word(capsys):
    from ipuflow.commands.cli import report_error

    path = "/tmp/a-very-long-directory-name-with-many-hyphens/and-another-one-to-pass-the-width/run-dir"
    report_error(f"Interrupted. `ipuflow train -s {path} -r` continues the run, and words follow it " * 2, 1)
    printed = capsys.readouterr().err
    assert f"-s {path} -r" in printed.replace("\n  ", " ")
    assert all(path in line or "-s " not in line for line in printed.splitlines())
