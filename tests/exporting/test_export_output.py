"""`ipuflow export` prints ipuflow's own lines only (issue 26.7): the exporters' chatter (torchvision
op registration warnings, onnxscript/onnx_ir pass logs, FutureWarnings) stays out of the terminal."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a CLI process that exports
def test_export_prints_no_exporter_noise(trained_run, tmp_path):
    done = subprocess.run([sys.executable, "-m", "ipuflow", "export", str(trained_run), "-o", str(tmp_path / "m.onnx")],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=600)
    assert done.returncode == 0, done.stderr
    for noise in ("torchvision", "onnxscript", "onnx_ir", "FutureWarning", "Warning:"):
        assert noise not in done.stderr, done.stderr
    assert "Exported" in done.stdout and "parity with PyTorch" in done.stdout
