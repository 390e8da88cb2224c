"""SHA-256 checksums of files, so that bytes overwritten on disk are noticed on load."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Union


def file_sha256(path: Union[str, Path]) -> str:
    """The hex SHA-256 digest of the file at `path`, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        # Not hashlib.file_digest: it needs Python 3.11, and ipuflow runs on 3.9 (Poplar SDK venvs).
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ChecksumMismatch(ValueError):
    """A file's bytes differ from the checksum recorded when it was written."""

    def __init__(self, path: Union[str, Path], expected: str, found: str) -> None:
        super().__init__(
            f"{path} does not match the SHA-256 checksum recorded when it was written "
            f"(recorded {expected[:12]}…, found {found[:12]}…): its bytes were changed or damaged on disk"
        )
        self.path = Path(path)


def verify_sha256(path: Union[str, Path], expected: str) -> None:
    """Raise `ChecksumMismatch` unless the file at `path` has the SHA-256 digest `expected`."""
    found = file_sha256(path)
    if found != expected:
        raise ChecksumMismatch(path, expected, found)
