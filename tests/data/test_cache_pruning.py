"""The data cache stays bounded: least recently used entries go once it is over its size limit,
never an entry being built or just built; `ipuflow cache list|clean` by hand."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from ipuflow.data import TextClassificationJsonReader
from ipuflow.data.columnar.entry_lock import exclusive, exclusive_if_free
from ipuflow.data.columnar.pruning import MAX_SIZE_ENV, list_entries, parse_size, prune

def data_file(tmp_path: Path, name: str, lines: int = 2000) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"text": f"{name} text number {index}", "label": "x"}) + "\n" for index in range(lines)))
    return path


def keys(directory: Path) -> set:
    return {entry.key for entry in list_entries(directory)}


def test_over_the_size_limit_the_least_recently_used_entries_go(cache_dir, tmp_path, monkeypatch):
    reader = TextClassificationJsonReader()
    path_a = data_file(tmp_path, "a")
    first = reader.read_columnar(path_a).directory.name
    second = reader.read_columnar(data_file(tmp_path, "b")).directory.name
    entry_size = list_entries(cache_dir)[0].size
    os.utime(cache_dir / first, (time.time() - 100, time.time() - 100))
    os.utime(cache_dir / second, (time.time() - 50, time.time() - 50))
    reader.read_columnar(path_a)  # a load renews the first entry's last use
    assert list_entries(cache_dir)[-1].key == first
    monkeypatch.setenv(MAX_SIZE_ENV, str(int(entry_size * 2.5)))
    third = reader.read_columnar(data_file(tmp_path, "c")).directory.name
    assert keys(cache_dir) == {first, third}  # the second was used least recently
    monkeypatch.setenv(MAX_SIZE_ENV, "1")  # smaller than any entry: the one just built stays all the same
    fourth = reader.read_columnar(data_file(tmp_path, "d"))
    assert keys(cache_dir) == {fourth.directory.name}
    assert sorted(path.name for path in cache_dir.iterdir()) == sorted([fourth.directory.name, f"{fourth.directory.name}.lock"])
    monkeypatch.setenv(MAX_SIZE_ENV, "none")
    reader.read_columnar(data_file(tmp_path, "e"))
    assert len(keys(cache_dir)) == 2


def test_a_removed_entry_keeps_serving_the_process_that_mapped_it(cache_dir, tmp_path):
    reader = TextClassificationJsonReader()
    path = data_file(tmp_path, "a")
    dataset = reader.read_columnar(path)
    assert prune(cache_dir, 0) and keys(cache_dir) == set()
    from ipuflow.data import Vocabulary

    vocab = Vocabulary.from_instances([dataset])
    assert dataset.indexed(vocab)[1999]["tokens"]  # still mapped
    assert reader.read_columnar(path).directory.name == dataset.directory.name  # and rebuilt on the next read


def test_an_entry_whose_key_is_being_built_is_left_alone(cache_dir, tmp_path):
    reader = TextClassificationJsonReader()
    dataset = reader.read_columnar(data_file(tmp_path, "a"))
    lock = cache_dir / f"{dataset.directory.name}.lock"
    leftover = cache_dir / f"{dataset.directory.name}.partial-abc"
    leftover.mkdir()
    with exclusive(lock):  # as a builder holds it
        assert prune(cache_dir, 0) == [] and keys(cache_dir) == {dataset.directory.name}
        assert leftover.is_dir()
    assert len(prune(cache_dir, 0)) == 1 and not leftover.exists() and list(cache_dir.iterdir()) == []


def test_a_waiter_on_a_lock_file_that_a_pruner_removed_locks_the_new_file(tmp_path):
    lock = tmp_path / "k.lock"
    acquired = threading.Event()

    def waiter():
        with exclusive(lock):
            acquired.set()
            time.sleep(0.5)

    with exclusive(lock):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)
        lock.unlink()  # as remove_entry does while holding the lock
    assert acquired.wait(5)
    with exclusive_if_free(lock) as free:
        assert not free  # the waiter holds the file that is there now, not the removed one
    thread.join()


def test_parse_size():
    assert parse_size("20GB", "x") == 20 * 2**30 and parse_size("1.5 m", "x") == int(1.5 * 2**20) and parse_size("0", "x") == 0
    from ipuflow.config import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"IPUFLOW_DATA_CACHE_MAX_SIZE: expected a size such as 20GB.*found 'lots'"):
        parse_size("lots", "IPUFLOW_DATA_CACHE_MAX_SIZE")


def run_cli(capsys, *arguments: str):
    """`ipuflow cache ...` in this process: (exit code, stdout, stderr)."""
    from ipuflow.commands.cli import run

    capsys.readouterr()
    code = run(["cache", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cache_command_lists_and_cleans(cache_dir, tmp_path, capsys):
    reader = TextClassificationJsonReader()
    old = reader.read_columnar(data_file(tmp_path, "old")).directory
    new = reader.read_columnar(data_file(tmp_path, "new")).directory
    os.utime(old, (time.time() - 10 * 86400, time.time() - 10 * 86400))
    code, out, err = run_cli(capsys, "list", "--cache-directory", str(cache_dir))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(old.name[:12]) and "old.jsonl" in lines[0] and "new.jsonl" in lines[1]
    assert lines[-1].startswith("2 entries") and "limit: 20,480.0 MB" in lines[-1]
    code, out, _ = run_cli(capsys, "clean", "--older-than", "7", "--cache-directory", str(cache_dir))
    assert code == 0 and "1 entries removed" in out and keys(cache_dir) == {new.name}
    assert run_cli(capsys, "clean", "--all")[0] == 0 and keys(cache_dir) == set()  # $IPUFLOW_DATA_CACHE_DIR
    code, _, err = run_cli(capsys, "clean")
    assert code == 2 and "give --all, --older-than DAYS or --max-size SIZE" in err
    code, _, err = run_cli(capsys, "clean", "--max-size", "big")
    assert code == 2 and "--max-size: expected a size such as 20GB" in err
