"""Exports never destroy (issue 31.6 and 31.7): `export-pretrained --overwrite` replaces only an
earlier export of ipuflow, and `export -o FILE` replaces FILE only once every check has passed,
never writes through a symbolic link and keeps its scratch files under names of its own."""

import errno
import json
import os
import shutil

import pytest

from ipuflow.commands.cli import run
from ipuflow.exporting.pretrained_export import EXPORT_MARKER

from tests.experiment.fault_injection import run_with_fault

pytestmark = pytest.mark.slow  # each trains or exports


def _files(directory):
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def _error(capsys):
    return " ".join(capsys.readouterr().err.split())


# ------------------------------------------------------------------------- export-pretrained


def test_overwrite_refuses_a_directory_that_is_not_an_earlier_export(pretrained_run, tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("my notes")
    assert run(["export-pretrained", str(pretrained_run), str(target), "--overwrite"]) == 2
    error = _error(capsys)
    assert "not an earlier export" in error and EXPORT_MARKER in error and "notes.txt" in error
    assert _files(target) == ["notes.txt"] and (target / "notes.txt").read_text() == "my notes"


@pytest.mark.parametrize("place", ["home", "working directory", "parent of the working directory", "run directory"])
def test_overwrite_refuses_a_home_the_working_directory_its_parent_and_the_run(place, pretrained_run, tmp_path,
                                                                                monkeypatch, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(pretrained_run, run_dir)
    archive = run_dir / "model.tar.gz"
    home, work = tmp_path / "home", tmp_path / "a" / "work"
    for directory in (home, work):
        directory.mkdir(parents=True)
        (directory / "keep.txt").write_text("keep")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    target = {"home": str(home), "working directory": ".", "parent of the working directory": "..",
              "run directory": str(run_dir)}[place]
    before = {directory: _files(directory) for directory in (tmp_path, home, work, run_dir)}
    assert run(["export-pretrained", str(archive), target, "--overwrite"]) == 2
    error = _error(capsys)
    assert "refuses" in error and place.split()[0] in error and "Traceback" not in error
    assert {directory: _files(directory) for directory in before} == before


def test_the_working_directory_as_output_leaves_no_temporary_directory(pretrained_run, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert run(["export-pretrained", str(pretrained_run), "."]) == 2
    assert "the working directory" in _error(capsys)
    assert _files(tmp_path) == ["work"]


def test_overwrite_replaces_an_earlier_export_but_not_files_added_to_it(pretrained_run, tmp_path, capsys):
    target = tmp_path / "exported"
    assert run(["export-pretrained", str(pretrained_run), str(target)]) == 0
    marker = json.loads((target / EXPORT_MARKER).read_text())
    assert set(marker["files"]) == {path.name for path in target.iterdir()} - {EXPORT_MARKER}
    assert run(["export-pretrained", str(pretrained_run), str(target), "--overwrite"]) == 0
    (target / "results.txt").write_text("my results")
    assert run(["export-pretrained", str(pretrained_run), str(target), "--overwrite"]) == 2
    assert "results.txt" in _error(capsys)
    assert (target / "results.txt").read_text() == "my results"
    assert _files(tmp_path) == sorted(["exported", *(f"exported/{name}" for name in _files(target))])


# ---------------------------------------------------------------------------------- export -o


def test_a_failed_int8_check_keeps_the_previous_file_and_leaves_nothing(trained_run, tmp_path, capsys):
    output = tmp_path / "model.onnx"
    output.write_bytes(b"the previous export")
    code = run(["export", str(trained_run), "-o", str(output), "--quantize", "int8", "--quantized-tolerance", "0"])
    assert code == 1 and "With int8 weights" in _error(capsys)
    assert output.read_bytes() == b"the previous export"
    assert _files(tmp_path) == ["model.onnx"]


def test_a_users_file_named_like_onnxruntimes_scratch_file_survives(trained_run, tmp_path):
    output, scratch = tmp_path / "m.onnx", tmp_path / "m-inferred.onnx"
    scratch.write_bytes(b"mine")
    assert run(["export", str(trained_run), "-o", str(output), "--quantize", "int8"]) == 0
    assert scratch.read_bytes() == b"mine"
    assert _files(tmp_path) == ["m-inferred.onnx", "m.onnx"]


def test_a_symbolic_link_at_the_output_is_replaced_not_written_through(trained_run, tmp_path):
    from ipuflow.execution.onnx_metadata import read_record

    victim, link = tmp_path / "victim.txt", tmp_path / "link.onnx"
    victim.write_text("not to be overwritten")
    link.symlink_to(victim)
    assert run(["export", str(trained_run), "-o", str(link)]) == 0
    assert victim.read_text() == "not to be overwritten"
    assert not link.is_symlink() and read_record(str(link)).parity["tolerance"] == 1e-4


def test_a_full_disk_keeps_the_previous_file_and_leaves_no_partial_one(trained_run, tmp_path, monkeypatch, capsys):
    import onnx

    def fill_the_disk(proto, path, *args, **kwargs):
        with open(path, "wb") as file:
            file.write(proto.SerializeToString()[:100])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(onnx, "save_model", fill_the_disk)
    output = tmp_path / "model.onnx"
    output.write_bytes(b"the previous export")
    assert run(["export", str(trained_run), "-o", str(output), "--exporter", "torchscript"]) == 1
    assert "full" in _error(capsys)
    assert output.read_bytes() == b"the previous export"
    assert _files(tmp_path) == ["model.onnx"]


def test_ctrl_c_during_the_parity_check_keeps_the_previous_file(trained_run, tmp_path):
    output = tmp_path / "model.onnx"
    output.write_bytes(b"the previous export")
    patch = """
        inject("ipuflow.exporting.onnx_export", "output_differences",
               before=lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGINT))
    """
    done = run_with_fault(["export", str(trained_run), "-o", str(output)], patch)
    assert done.returncode != 0 and "Exported" not in done.stdout, done.stderr
    assert output.read_bytes() == b"the previous export"
    assert _files(tmp_path) == ["model.onnx"]
