"""Exclusive locks on data-cache keys (an advisory `flock` on `<key>.lock`), safe against the lock
file being removed by a process that pruned the entry."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator, Optional

from ipuflow.storage.run_lock import open_lock_file

try:  # POSIX; elsewhere concurrent builders are not serialised (each builds its own copy)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)


def _same_file(handle: IO[Any], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _acquire(lock_path: Path, blocking: bool) -> Optional[IO[Any]]:
    """The open lock file, locked; None if `blocking` is false and another process holds it."""
    while True:
        handle = open_lock_file(lock_path)
        if fcntl is None:  # pragma: no cover
            return handle
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                handle.close()
                return None
            started = time.monotonic()
            logger.info("Waiting for another process to finish building %s", lock_path.with_suffix(""))
            fcntl.flock(handle, fcntl.LOCK_EX)
            logger.info("Waited %.1fs for the data cache", time.monotonic() - started)
        # A pruner removes a lock file while holding it: a lock on a removed file locks nothing
        # that a later process would see, so lock the file that is there now instead.
        if _same_file(handle, lock_path):
            return handle
        handle.close()


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold the lock at `lock_path`, waiting for another holder to let go."""
    handle = _acquire(lock_path, blocking=True)
    try:
        yield
    finally:
        handle.close()  # type: ignore[union-attr]  # closing releases the flock


@contextlib.contextmanager
def exclusive_if_free(lock_path: Path) -> Iterator[bool]:
    """Hold the lock at `lock_path` if no other process holds it (yields whether it does)."""
    handle = _acquire(lock_path, blocking=False)
    try:
        yield handle is not None
    finally:
        if handle is not None:
            handle.close()
