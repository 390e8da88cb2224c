"""The data cache removes only what it built, and never trusts an entry whose files changed.

Issue 22's probes: `ipuflow cache clean --all` and the pruning after a build deleted run
directories that shared the cache's folder (any directory with a `meta.json` counted as an entry);
a truncated `types0.counts` silently shrank the vocabulary, an overwritten label column was used,
a truncated `meta.json` failed every later run with a raw JSONDecodeError, and a read-only cache
gave a raw OSError.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import numpy
import pytest

from ipuflow.data import TextClassificationJsonReader, Vocabulary
from ipuflow.data.columnar.entry_marker import MARKER_NAME, read_marker
from ipuflow.data.columnar.pruning import MAX_SIZE_ENV, list_entries, prune


def data_file(tmp_path: Path, name: str, lines: int = 300) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"text": f"{name} words {index} and {index % 7}", "label": f"l{index % 3}"}) + "\n"
                            for index in range(lines)))
    return path


def run_directory(parent: Path, name: str) -> Path:
    """What a run directory holds that made it look like a cache entry: a meta.json (and more)."""
    run = parent / name
    (run / "vocabulary").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"ipuflow_version": "0.1", "format": 1, "size": 3}))
    (run / "config.json").write_text("{}")
    (run / "best.th").write_bytes(b"\0" * 4096)
    return run


def test_cache_clean_all_leaves_run_directories_in_the_same_folder(cache_dir, tmp_path, capsys):
    from ipuflow.commands.cli import run

    reader = TextClassificationJsonReader()
    built = reader.read_columnar(data_file(tmp_path, "a")).directory
    runs = [run_directory(cache_dir, "my_run"), run_directory(cache_dir, "0123456789abcdef0123456789abcdef01234567")]
    (cache_dir / "notes.partial-x").mkdir()  # user things that look like leftovers by name only
    (cache_dir / "0123456789abcdef0123456789abcdef01234567.removing-x").mkdir()
    (cache_dir / "0123456789abcdef0123456789abcdef01234567.removing-x" / "keep.txt").write_text("mine")
    assert [entry.path for entry in list_entries(cache_dir)] == [built]
    assert run(["cache", "clean", "--all", "--cache-directory", str(cache_dir)]) == 0
    assert "1 entries removed" in capsys.readouterr().out
    assert not built.exists()
    for directory in runs:
        assert (directory / "best.th").stat().st_size == 4096 and (directory / "meta.json").is_file()
    assert (cache_dir / "notes.partial-x").is_dir()
    assert (cache_dir / "0123456789abcdef0123456789abcdef01234567.removing-x" / "keep.txt").read_text() == "mine"


def test_pruning_after_a_build_leaves_an_older_run_directory_alone(cache_dir, tmp_path, monkeypatch):
    run = run_directory(cache_dir, "older_run")
    monkeypatch.setenv(MAX_SIZE_ENV, "1")  # smaller than anything: every entry but the new one would go
    reader = TextClassificationJsonReader()
    first = reader.read_columnar(data_file(tmp_path, "a")).directory
    second = reader.read_columnar(data_file(tmp_path, "b")).directory
    assert not first.exists() and second.is_dir()
    assert (run / "best.th").is_file() and (run / "vocabulary").is_dir()


def test_an_entry_carries_a_marker_with_its_key_a_random_id_and_checksums(cache_dir, tmp_path):
    reader = TextClassificationJsonReader()
    entry = reader.read_columnar(data_file(tmp_path, "a")).directory
    other = reader.read_columnar(data_file(tmp_path, "b")).directory
    marker, other_marker = read_marker(entry), read_marker(other)
    assert marker["key"] == entry.name and marker["complete"] is True and len(marker["id"]) == 32
    assert marker["id"] != other_marker["id"]
    assert {"meta.json", "types0.counts", "types1.counts", "key.json"} <= set(marker["files"])
    assert all(record["sha256"] for record in marker["files"].values())


def vocabulary_size(dataset) -> int:
    return Vocabulary.from_instances([dataset]).get_vocab_size("tokens")


@pytest.mark.parametrize("damage", ["truncate counts", "overwrite labels", "truncate meta", "drop marker"])
def test_a_damaged_entry_is_rebuilt_with_a_warning_naming_it(damage, cache_dir, tmp_path, caplog):
    reader = TextClassificationJsonReader()
    path = data_file(tmp_path, "a")
    dataset = reader.read_columnar(path)
    entry, expected_size = dataset.directory, vocabulary_size(dataset)
    labels = [dataset._stored(index)["label"] for index in range(len(dataset))]
    del dataset
    if damage == "truncate counts":
        counts = entry / "types0.counts"
        counts.write_bytes(counts.read_bytes()[:16])
    elif damage == "overwrite labels":
        label_field = next(field for field in json.loads((entry / "meta.json").read_text())["fields"] if field["kind"] == "labels")
        column = entry / f"{label_field['prefix']}.values"
        column.write_bytes(numpy.zeros(len(column.read_bytes()) // 4, dtype=numpy.int32).tobytes())
    elif damage == "truncate meta":
        (entry / "meta.json").write_text((entry / "meta.json").read_text()[:40])
    else:
        (entry / MARKER_NAME).write_text("{")
    with caplog.at_level(logging.WARNING):
        rebuilt = reader.read_columnar(path)
    assert rebuilt.directory == entry
    assert any(str(entry) in record.getMessage() and "rebuilding" in record.getMessage() for record in caplog.records)
    assert vocabulary_size(rebuilt) == expected_size
    assert [rebuilt._stored(index)["label"] for index in range(len(rebuilt))] == labels
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        reader.read_columnar(path)  # now whole again: loaded without a word
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_something_else_at_an_entrys_name_is_refused_not_removed(cache_dir, tmp_path):
    from ipuflow.config import ConfigurationError

    reader = TextClassificationJsonReader()
    path = data_file(tmp_path, "a")
    entry = reader.read_columnar(path).directory
    prune(cache_dir, 0)
    squatter = run_directory(cache_dir, entry.name)
    with pytest.raises(ConfigurationError, match=f"{entry}, which is not a data cache entry.*move it away"):
        reader.read_columnar(path)
    assert (squatter / "best.th").is_file()


def test_a_cache_that_cannot_be_written_names_it_and_no_cache(cache_dir, tmp_path, monkeypatch):
    """As root, permissions cannot make a directory read-only, so the refusal is injected where the
    cache creates its first file (a read-only mount gives the same EROFS)."""
    import tempfile

    from ipuflow.storage.failures import StorageFailure

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(cache_dir))

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    with pytest.raises(StorageFailure, match=r"data cache .*cache cannot be written \(Read-only file system.*--no-cache"):
        TextClassificationJsonReader().read_columnar(data_file(tmp_path, "a"))
