"""One process per run directory: an exclusive lock held for the run's lifetime.

The lock is an advisory `flock` on a small file inside the directory, which holds the PID and host
of its owner; the operating system releases it when the process ends, however it ends, so a crash
never leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path
from typing import Any, Optional, Union

try:
    import fcntl
except ImportError:  # pragma: no cover - platforms without flock run without the lock
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".ipuflow.lock"


class RunDirectoryLocked(RuntimeError):
    """Another process holds the run directory's lock."""


def open_lock_file(path: Path) -> Any:
    """`path` opened for reading and writing (created if missing), never through a symbolic link: a
    link planted there would otherwise have its target overwritten with the owner's PID."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP or path.is_symlink():
            raise LockFileIsALink(
                f"The lock file {path} is a symbolic link (to {os.readlink(path)}); ipuflow does not follow it, "
                "so as not to overwrite what it points to. Remove the link and run again."
            ) from None
        raise
    return os.fdopen(descriptor, "r+")


class LockFileIsALink(RuntimeError):
    """A lock file is a symbolic link, which ipuflow refuses to open."""


class RunDirectoryLock:
    """The exclusive lock of `directory` (created if needed); `acquire` raises
    `RunDirectoryLocked`, naming the holder, when another process has it."""

    def __init__(self, directory: Union[str, Path]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._file: Optional[Any] = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._file is not None

    def acquire(self) -> "RunDirectoryLock":
        """Take the lock without waiting, and record this process as its owner."""
        if self._file is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        file = open_lock_file(self.path)
        if fcntl is not None:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                file.seek(0)
                holder = file.read()
                file.close()
                raise RunDirectoryLocked(self._held_message(holder)) from None
        file.seek(0)
        file.truncate()
        file.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n")
        file.flush()
        self._file = file
        return self

    def refuse_if_held_elsewhere(self) -> None:
        """Raise `RunDirectoryLocked`, naming the holder, if another process holds the lock now;
        nothing is taken, and no lock file is created where there is none."""
        if self._file is not None or fcntl is None or not self.path.is_file():
            return
        with open_lock_file(self.path) as file:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                file.seek(0)
                raise RunDirectoryLocked(self._held_message(file.read())) from None
            # Closing the file gives the probe's lock back.

    def release(self) -> None:
        """Give the lock back. The file stays, emptied of its owner's record while still locked:
        removing it would let a process that opened it just before take a lock on a file that no
        longer has a name, beside the next process's new one."""
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            self._file.flush()
            self._file.close()
            self._file = None

    def __enter__(self) -> "RunDirectoryLock":
        return self.acquire()

    def __exit__(self, *exc_info: Any) -> None:
        self.release()

    def _held_message(self, holder: str) -> str:
        try:
            owner = json.loads(holder)
            who = f"process {owner['pid']} on host {owner['host']}"
        except (ValueError, KeyError, TypeError):
            who = "another process"
        return (
            f"The run directory {self.directory} is in use by {who}, which holds its lock ({self.path}). "
            "Only one ipuflow process may use a run directory at a time, and neither --recover nor --force "
            "may take it over. Wait for that process to end (or stop it), or choose another directory."
        )
