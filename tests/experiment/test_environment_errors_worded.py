"""Raw errors become one paragraph naming the file and what to do (issue 22, last part).

The probes: a full disk in the run directory gave `RuntimeError: [enforce fail at
inline_container.cc:672]` with nothing about space; `-s` naming a dangling symlink gave a raw
FileExistsError; malformed archives gave NotADirectoryError and RecursionError. (Truncated and
read-only cache entries: tests/data/test_cache_safety.py; a mis-shaped tensor:
test_archive_exhaustion.py.)
"""

from __future__ import annotations

import errno
import tarfile
from types import SimpleNamespace

import pytest
import torch

from ipuflow.commands.cli import run

from tests.experiment.test_archive_limits import file_member, members_of, tar_bytes, write_gz


def outcome(capsys, command):
    capsys.readouterr()
    code = run(command)
    return code, " ".join(capsys.readouterr().err.split())


@pytest.fixture
def full_disk(monkeypatch):
    """The file system reports no free space (as it does once a checkpoint has filled it)."""
    monkeypatch.setattr("ipuflow.storage.failures.os.statvfs",
                        lambda path: SimpleNamespace(f_bfree=0, f_bavail=0, f_frsize=4096))


@pytest.mark.parametrize("failure", [
    RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0"),  # what torch.save raises
    OSError(errno.ENOSPC, "No space left on device"),
])
def test_a_full_disk_while_saving_a_checkpoint_says_so(failure, tiny_config_file, tmp_path, monkeypatch, capsys, full_disk):
    def failing_save(*args, **kwargs):
        raise failure

    monkeypatch.setattr(torch, "save", failing_save)
    directory = tmp_path / "run"
    code, err = outcome(capsys, ["train", str(tiny_config_file), "-s", str(directory)])
    assert code == 1, err
    assert "the disk holding" in err and "run/training_state_e1_b0.pt is full (no space left on device)" in err, err
    assert "Free disk space" in err and "Traceback" not in err and "inline_container" not in err


def test_a_failed_save_with_space_left_is_not_put_down_to_the_disk(tiny_config_file, tmp_path, monkeypatch, capsys):
    def failing_save(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(torch, "save", failing_save)
    code, err = outcome(capsys, ["train", str(tiny_config_file), "-s", str(tmp_path / "run")])
    assert code == 1 and "something else" in err and "no space left" not in err, err


def test_serialization_dir_naming_a_dangling_symlink(tiny_config_file, tmp_path, capsys):
    link = tmp_path / "runs"
    link.symlink_to(tmp_path / "gone" / "runs")
    code, err = outcome(capsys, ["train", str(tiny_config_file), "-s", str(link)])
    assert code == 2 and f"{link} is a symbolic link to {tmp_path / 'gone' / 'runs'}, which does not exist" in err, err


def test_a_file_where_the_vocabulary_directory_belongs(trained_run, tiny_data, tmp_path, capsys):
    pairs = members_of(trained_run)
    clash = [file_member("vocabulary", b"not a directory")] + [pair for pair in pairs if pair[0].name != "vocabulary"]
    archive = write_gz(tmp_path / "clash.tar.gz", tar_bytes(clash))
    code, err = outcome(capsys, ["evaluate", str(archive), str(tiny_data / "test.jsonl")])
    assert code == 2 and "collides with another one" in err and "Traceback" not in err, err


def test_a_config_nested_too_deeply(trained_run, tiny_data, tmp_path, capsys):
    pairs = [(member, data) for member, data in members_of(trained_run) if member.name != "config.json"]
    text = '{"model": ' + '{"x": ' * 100_000 + "1" + "}" * 100_000 + "}"
    archive = write_gz(tmp_path / "deep.tar.gz", tar_bytes(pairs + [file_member("config.json", text.encode())]))
    code, err = outcome(capsys, ["evaluate", str(archive), str(tiny_data / "test.jsonl")])
    assert code == 2 and "config.json is not valid JSON (RecursionError" in err, err


def test_a_malformed_archive_file_is_exit_2_with_a_paragraph(trained_run, tiny_data, tmp_path, capsys):
    """A vocabulary directory where the non-padded namespaces file belongs: an IsADirectoryError."""
    pairs = members_of(trained_run)
    directory = tarfile.TarInfo("vocabulary/non_padded_namespaces.txt")
    directory.type = tarfile.DIRTYPE
    kept = [(member, data) for member, data in pairs if member.name != "vocabulary/non_padded_namespaces.txt"]
    archive = write_gz(tmp_path / "odd.tar.gz", tar_bytes(kept + [(directory, None)]))
    code, err = outcome(capsys, ["evaluate", str(archive), str(tiny_data / "test.jsonl")])
    assert code == 2 and "is not a well-formed model archive" in err and "Traceback" not in err, err
