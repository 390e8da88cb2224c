"""The commands whose optional packages the quickstart's plain install lacks say so before any work,
with the pip command (issue 36, point 2): `ipuflow tune` needs optuna (`[tune]`), `ipuflow export`
onnx and ONNX Runtime (`[onnx]`). A package is made missing as Python reads it: `sys.modules[name] = None`."""

import sys

from ipuflow.commands.cli import run

from tests.conftest import ROOT


def test_tune_without_optuna_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert run(["tune", str(ROOT / "configs/quickstart.jsonnet"), str(ROOT / "configs/quickstart_search.jsonnet"),
                "-s", str(tmp_path / "search")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "ipuflow tune needs optuna, which is not installed: pip install 'ipuflow[tune]'." in message
    assert not (tmp_path / "search").exists()


def test_export_without_onnx_runtime_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(b"")  # never read: the check comes first
    assert run(["export", str(archive), "-o", str(tmp_path / "model.onnx")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "ipuflow export needs onnxruntime, which is not installed: pip install 'ipuflow[onnx]'." in message
