"""Failures of the machine's storage (a full disk, a read-only or forbidden directory), worded as
one paragraph that names the place and what to do, instead of the raw `OSError`."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional, Union

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


class StorageFailure(RuntimeError):
    """The environment's storage failed (exit code 1: the input was fine, the machine was not)."""


def is_storage_failure(error: BaseException) -> bool:
    """Whether `error` is a full disk or a directory that cannot be written (also when a library
    wrapped the `OSError`, as torch.save does with its 'enforce fail' RuntimeError)."""
    if isinstance(error, OSError):
        return error.errno in NO_SPACE + NOT_WRITABLE
    text = str(error)
    return "No space left on device" in text or "Disk quota exceeded" in text


LOW_SPACE_BYTES = 16 * 2**20
"""Free space below which a failed write is put down to a full disk (torch.save reports ENOSPC as
an 'enforce fail at inline_container.cc' RuntimeError that does not say so)."""


def disk_nearly_full(directory: Union[str, Path]) -> bool:
    """Whether the file system holding `directory` has less than `LOW_SPACE_BYTES` free for this user."""
    try:
        usage = os.statvfs(directory)
    except OSError:
        return False
    blocks = usage.f_bfree if os.geteuid() == 0 else usage.f_bavail
    return blocks * usage.f_frsize < LOW_SPACE_BYTES


def storage_failure(error: BaseException, place: Union[str, Path], advice: str = "",
                    no_space_advice: Optional[str] = None) -> StorageFailure:
    """The one-paragraph failure for `error` while writing to `place`; `advice` says what else the
    user can do (such as a flag that avoids the place)."""
    text = str(error)
    code = getattr(error, "errno", None)
    if code in NO_SPACE or "No space left on device" in text or "Disk quota exceeded" in text or (
            code is None and disk_nearly_full(Path(place).parent if not Path(place).is_dir() else place)):
        what = f"the disk holding {place} is full (no space left on device)"
        todo = no_space_advice or f"Free disk space there (or choose a location on another disk) and run again. {advice}"
    else:
        reason = getattr(error, "strerror", None) or text
        filename = getattr(error, "filename", None)
        what = f"{place} cannot be written ({reason}{': ' + str(filename) if filename else ''})"
        todo = f"Make it writable or choose another location. {advice}"
    return StorageFailure(f"{what}. {todo}".strip())
