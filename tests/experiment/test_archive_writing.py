"""Issue 32: `model.tar.gz` is written fast (its members stored, not compressed, in the gzip
stream), and archives written the old way (gzip level 9) still load."""

from __future__ import annotations

import gzip
import tarfile

import torch

from ipuflow.commands.cli import run
from ipuflow.experiment.archive.archival import load_archive


def test_the_archive_is_a_gzip_tar_whose_members_are_stored_uncompressed(trained_run):
    archive = trained_run / "model.tar.gz"
    tar = gzip.decompress(archive.read_bytes())
    assert archive.stat().st_size >= len(tar)  # nothing compressed (gzip adds only its framing)
    with tarfile.open(archive) as opened:  # what users' tools read: a gzip-compressed tar
        weights = opened.extractfile("weights.safetensors").read()
    assert weights == (trained_run / "best.safetensors").read_bytes()


def test_an_archive_written_the_old_way_still_loads(trained_run, tiny_data, tmp_path, capsys):
    old = tmp_path / "old" / "model.tar.gz"
    old.parent.mkdir()
    # Until issue 32 the archive was tarfile's "w:gz" at its default, gzip's level 9.
    with tarfile.open(trained_run / "model.tar.gz") as new, tarfile.open(old, "w:gz", compresslevel=9) as rewritten:
        for member in new.getmembers():
            rewritten.addfile(member, new.extractfile(member) if member.isfile() else None)
    assert old.stat().st_size < (trained_run / "model.tar.gz").stat().st_size
    loaded, expected = load_archive(old), load_archive(trained_run / "model.tar.gz")
    for name, value in expected.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], value)
    assert run(["evaluate", str(old), str(tiny_data / "test.jsonl")]) == 0, capsys.readouterr().err
