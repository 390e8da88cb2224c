"""Every file `ipuflow train` and `evaluate` write gets the permissions the umask gives (and a
redirected `--file-friendly-logging` log has whole lines)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.experiment.conftest import tiny_config


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_train_and_evaluate_outputs_are_readable_by_the_group_under_umask_022(tiny_data, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(tiny_data, num_epochs=2)))
    run_dir, output = tmp_path / "run", tmp_path / "evaluation.json"
    python = f"{sys.executable} -m ipuflow"
    log = tmp_path / "train.log"
    script = (f"umask 022 && {python} train {config} -s {run_dir} --file-friendly-logging 2> {log} && "
              f"{python} evaluate {run_dir / 'model.tar.gz'} {tiny_data / 'test.jsonl'} --output-file {output}")
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    completed = subprocess.run(["sh", "-c", script], env=environment, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:] + log.read_text()[-2000:]
    # A redirected, file-friendly log has whole lines: no carriage-return-joined progress.
    assert b"\r" not in log.read_bytes() and "epoch 1 validation: 100%" in log.read_text()
    written = [path for path in run_dir.iterdir() if path.is_file()] + [output]
    names = {path.name for path in written}
    assert {"config.json", "metrics.json", "metrics_epoch_0.json", "best.safetensors", "model.tar.gz"} <= names
    assert any(name.startswith("model_state_") for name in names) and any(name.startswith("training_state_") for name in names)
    assert {path.name: oct(_mode(path)) for path in written} == {path.name: oct(0o644) for path in written}
