"""`ipuflow predict`'s inputs (issue 26.6 and 26.7): bytes that are not UTF-8 get the same message
(file or stdin, line and column; exit 2) however the input is read, and a directory is named as one."""

import io
import sys

import pytest

from ipuflow.commands.cli import run

NOT_UTF8 = b'{"text": "good film"}\n{"text": "caf\xe9 scene"}\n'


def test_a_non_utf8_file_names_the_line(trained_run, tmp_path, capsys):
    path = tmp_path / "inputs.jsonl"
    path.write_bytes(NOT_UTF8)
    assert run(["predict", str(trained_run), str(path)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert f"{path}:2: not UTF-8 text" in message and "column 14" in message and "Traceback" not in message


def test_non_utf8_stdin_is_refused_the_same_way_not_replaced(trained_run, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NOT_UTF8), encoding="utf-8", errors="replace"))
    assert run(["predict", str(trained_run), "-"]) == 2
    captured = capsys.readouterr()
    assert "stdin:2: not UTF-8 text" in " ".join(captured.err.split())
    assert "\ufffd" not in captured.out


def test_the_dataset_reader_path_gives_the_same_message(trained_run, tmp_path, capsys):
    path = tmp_path / "inputs.jsonl"
    path.write_bytes(b'{"text": "good film", "label": "pos"}\n{"text": "caf\xe9 scene", "label": "pos"}\n')
    assert run(["predict", str(trained_run), str(path), "--use-dataset-reader"]) == 2
    assert f"{path}:2: not UTF-8 text" in " ".join(capsys.readouterr().err.split())


def test_utf8_stdin_still_predicts(trained_run, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO('{"text": "a café scene"}\n'.encode())))
    assert run(["predict", str(trained_run), "-"]) == 0
    assert capsys.readouterr().out.count("\n") == 1


@pytest.mark.parametrize("flag", [[], ["--use-dataset-reader"]])
def test_a_directory_as_input_is_named_as_a_directory(trained_run, tmp_path, capsys, flag):
    assert run(["predict", str(trained_run), str(tmp_path), *flag]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "is a directory" in message and "does not exist" not in message
