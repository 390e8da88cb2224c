"""File checksums are plain SHA-256 of the bytes on disk, on every Python ipuflow supports."""

from __future__ import annotations

import hashlib

from ipuflow.storage import file_sha256


def test_the_checksum_is_the_sha256_of_the_whole_file_without_hashlib_file_digest(tmp_path, monkeypatch):
    # hashlib.file_digest is Python 3.11+; ipuflow supports 3.9 (Poplar SDK environments, docs/ipu.md).
    monkeypatch.delattr(hashlib, "file_digest", raising=False)
    data = bytes(range(256)) * 9000  # more than one 1 MiB read
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert file_sha256(empty) == hashlib.sha256(b"").hexdigest()
