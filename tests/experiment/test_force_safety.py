"""`--force` deletes only what ipuflow created, and the run lock never follows a symbolic link.

Issue 22's probes: `-s ~ --force` emptied a (scratch) home, `.ssh` included; `-s / --force` would
have emptied the machine; a `.ipuflow.lock` that was a symlink had its target overwritten. Every
destructive check here runs in pytest's tmp_path; the roots of this machine are only ever given to
the check itself, which deletes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError
from ipuflow.experiment.serialization_dir import refuse_forced_removal


def scratch_home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "home" / "someone"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("secret")
    (home / "projects" / "thesis").mkdir(parents=True)
    (home / "projects" / "thesis" / "draft.tex").write_text("words")
    monkeypatch.setenv("HOME", str(home))
    return home


def train(capsys, config: Path, directory: Path, *flags: str):
    capsys.readouterr()
    code = run(["train", str(config), "-s", str(directory), *flags])
    return code, " ".join(capsys.readouterr().err.split())  # the paragraph as one line, however it was wrapped


def test_force_refuses_a_home_and_deletes_nothing(tiny_config_file, tmp_path, monkeypatch, capsys):
    home = scratch_home(tmp_path, monkeypatch)
    for target in (home, tmp_path / "link-to-home"):
        if target.name == "link-to-home":
            target.symlink_to(home)
        code, err = train(capsys, tiny_config_file, target, "--force")
        assert code == 2 and "--force refuses to delete the contents of" in err and "a home directory" in err, err
    assert (home / ".ssh" / "id_ed25519").read_text() == "secret"
    assert (home / "projects" / "thesis" / "draft.tex").read_text() == "words"
    assert not (home / ".ipuflow.lock").exists()  # refused before the lock was taken there


def test_force_refuses_a_directory_that_is_not_an_ipuflow_run_naming_what_it_holds(tiny_config_file, tmp_path, capsys):
    stuff = tmp_path / "photos"
    (stuff / "2024").mkdir(parents=True)
    (stuff / "cat.jpg").write_bytes(b"\xff\xd8")
    (stuff / "meta.json").write_text('{"camera": "x"}')  # a meta.json is not enough: it must be ipuflow's
    code, err = train(capsys, tiny_config_file, stuff, "--force")
    assert code == 2 and "not an ipuflow run directory" in err and "2024, cat.jpg, meta.json" in err, err
    assert (stuff / "cat.jpg").read_bytes() == b"\xff\xd8" and (stuff / "2024").is_dir()


def test_force_refuses_the_working_directory_and_its_parents(tiny_config_file, tmp_path, monkeypatch, capsys):
    working = tmp_path / "work" / "here"
    working.mkdir(parents=True)
    (working / "notes.txt").write_text("mine")
    monkeypatch.chdir(working)
    for target, reason in ((Path("."), "the working directory"), (Path(".."), "a parent of the working directory")):
        code, err = train(capsys, tiny_config_file, target, "--force")
        assert code == 2 and reason in err, err
    assert (working / "notes.txt").read_text() == "mine"


def test_the_check_refuses_filesystem_roots_without_deleting_anything():
    """Only the check is run on real paths: it raises before anything could be removed."""
    for root in (Path("/"), Path("/.."), Path("//")):
        with pytest.raises(ConfigurationError, match="a filesystem root"):
            refuse_forced_removal(root)
    with pytest.raises(ConfigurationError, match="working directory"):
        refuse_forced_removal(Path.cwd())


def test_force_still_starts_over_in_an_ipuflow_run_directory_and_in_an_empty_one(trained_run, tiny_config_file, tmp_path,
                                                                                  capsys):
    import shutil

    run_copy = tmp_path / "old_run"
    shutil.copytree(trained_run, run_copy)
    (run_copy / "model.tar.gz").unlink()
    assert refuse_forced_removal(run_copy) is None
    started = tmp_path / "started"  # a start stopped before meta.json was written
    started.mkdir()
    (started / "config.json").write_text("{}")
    (started / "out.log").write_text("12:00:00 INFO ipuflow.experiment.run: starting\n")
    assert refuse_forced_removal(started) is None
    (started / "out.log").write_text("another tool's log\n")  # a config and a log are not enough by themselves
    with pytest.raises(ConfigurationError, match="not an ipuflow run directory"):
        refuse_forced_removal(started)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert refuse_forced_removal(empty) is None and refuse_forced_removal(tmp_path / "new") is None


def test_a_lock_file_that_is_a_symlink_is_not_followed(tiny_config_file, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / ".ipuflow.lock").symlink_to(victim)
    code, err = train(capsys, tiny_config_file, directory)
    assert code == 1 and "is a symbolic link" in err and "Remove the link" in err, err
    assert victim.read_text() == "precious" and os.path.islink(directory / ".ipuflow.lock")


def test_a_cache_lock_file_that_is_a_symlink_is_not_followed(tmp_path):
    from ipuflow.data.columnar.entry_lock import exclusive
    from ipuflow.storage.run_lock import LockFileIsALink

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "key.lock").symlink_to(victim)
    with pytest.raises(LockFileIsALink):
        with exclusive(tmp_path / "key.lock"):
            pass
    assert victim.read_text() == "precious"


def test_force_refuses_a_folder_holding_an_extracted_archive_and_the_users_files(trained_run, tiny_config_file,
                                                                                 tmp_path, capsys):
    """Issue 31.8: the archive's meta.json (which records an ipuflow version) is not a run by itself."""
    import tarfile

    folder = tmp_path / "downloads"
    folder.mkdir()
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        archive.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    assert (folder / "meta.json").is_file() and (folder / "config.json").is_file()
    (folder / "paper.pdf").write_bytes(b"%PDF mine")
    code, err = train(capsys, tiny_config_file, folder, "--force")
    assert code == 2 and "not an ipuflow run directory" in err and "paper.pdf" in err, err
    assert (folder / "paper.pdf").read_bytes() == b"%PDF mine" and (folder / "meta.json").is_file()
