"""Writing files so that a crash never leaves half of one (temporary name, fsync, rename), checking
that they still hold what was written (SHA-256), and one process per run directory (a lock)."""

from ipuflow.storage.atomic import (
    link_atomically, remove_interrupted_writes, write_atomically, write_directory_atomically, write_json_atomically,
    write_text_atomically,
)
from ipuflow.storage.checksum import ChecksumMismatch, file_sha256, verify_sha256
from ipuflow.storage.run_lock import LOCK_NAME, RunDirectoryLock, RunDirectoryLocked

__all__ = [
    "ChecksumMismatch", "LOCK_NAME", "RunDirectoryLock", "RunDirectoryLocked", "file_sha256", "link_atomically",
    "remove_interrupted_writes", "verify_sha256", "write_atomically", "write_directory_atomically", "write_json_atomically",
    "write_text_atomically",
]
