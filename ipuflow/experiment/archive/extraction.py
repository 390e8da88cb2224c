"""Extracting a model archive that may come from anyone: one pass over the tar, within limits.

A few-MB `model.tar.gz` must not exhaust the machine or smuggle anything past the reader, so the
tar is read as a stream, member by member, and refused (a `ConfigurationError` naming the file) as
soon as it breaks one of these rules:

* at most `MAX_MEMBERS` members, each a plain file or directory inside the target folder, named
  once (a second `config.json` would otherwise silently win), with a name of at most
  `MAX_NAME_LENGTH` characters (long-name and pax headers over `MAX_HEADER_BYTES` are refused
  before they are read);
* each file at most `MAX_MEMBER_BYTES` (a JSON file `MAX_JSON_BYTES`), except the weights, and all
  of them together at most the size limit (`IPUFLOW_ARCHIVE_MAX_SIZE`, default
  `DEFAULT_MAX_TOTAL_BYTES`), and never more than the temporary directory has free;
* nothing after the tar's end-of-archive marker but its zero padding (at most `MAX_TRAILING_BYTES`
  are read there: data hidden after the end is never decompressed whole).
"""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import Any, Dict, Set, Union

from ipuflow.config import ConfigurationError
from ipuflow.storage.failures import LOW_SPACE_BYTES, StorageFailure

MAX_MEMBERS = 10_000
MAX_NAME_LENGTH = 1024
MAX_HEADER_BYTES = 64 * 2**10
MAX_MEMBER_BYTES = 256 * 2**20
MAX_JSON_BYTES = 16 * 2**20
"""The limit for the JSON members (the config, meta.json), which are parsed whole into memory."""
DEFAULT_MAX_TOTAL_BYTES = 32 * 2**30
MAX_SIZE_ENV = "IPUFLOW_ARCHIVE_MAX_SIZE"
"""Environment variable: the largest total size of an archive's files, such as `64GB`."""
MAX_TRAILING_BYTES = 64 * 2**10
WEIGHTS_MEMBER = "weights.safetensors"
"""The one member allowed past `MAX_MEMBER_BYTES` (up to the total limit)."""

# Python's own guard against tar members that escape or carry special files (3.12, back-ported to 3.8+).
_DATA_FILTER: Dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


class _ArchiveRefused(Exception):
    """An archive broke one of the limits (raised from inside tarfile's header parsing too)."""


def max_total_bytes() -> int:
    """The total size limit of an archive's files, from `$IPUFLOW_ARCHIVE_MAX_SIZE` if set."""
    text = os.environ.get(MAX_SIZE_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_TOTAL_BYTES
    from ipuflow.data.columnar.pruning import parse_size

    return parse_size(text, MAX_SIZE_ENV) or DEFAULT_MAX_TOTAL_BYTES


def shown_name(name: str, limit: int = MAX_NAME_LENGTH) -> str:
    """A member name fit for an error message: whole up to the longest name an archive may hold, so
    that the error names the file; cut beyond (a hostile one may be megabytes long)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}… ({len(name):,} characters)"


class _LimitedTarInfo(tarfile.TarInfo):
    """Refuses a long-name or pax header larger than `MAX_HEADER_BYTES` before tarfile reads it whole."""

    def _proc_member(self, tarfile_object: Any) -> Any:  # tarfile's own hook for extension headers
        extension = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                     tarfile.SOLARIS_XHDTYPE)
        if self.type in extension and self.size > MAX_HEADER_BYTES:
            raise _ArchiveRefused(f"it holds an extended header of {self.size:,} bytes (a member name or attributes; "
                                  f"at most {MAX_HEADER_BYTES:,} are read)")
        return super()._proc_member(tarfile_object)  # type: ignore[misc]


class _CountingReader:
    """A read-only stream that counts what it gives and refuses to give more than `limit` bytes."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        if self.count > self.limit:
            raise _ArchiveRefused(f"it unpacks to more than its size limit of {self.limit:,} bytes "
                                  f"(set {MAX_SIZE_ENV} to allow more)")
        return data


def extract_archive(archive_file: Union[str, Path], target: Union[str, Path]) -> None:
    """Extract regular files and directories only, within the limits above, refusing any member that
    would land outside `target`.

    A file that is not a whole gzip-compressed tar (truncated, corrupt, empty, another format) or
    breaks a limit is a `ConfigurationError` naming it; what was extracted before is left for the
    caller's temporary directory to remove.
    """
    target = Path(target).resolve()
    total_limit = max_total_bytes()
    try:
        raw = gzip.open(archive_file, "rb")
    except OSError as error:
        raise unreadable_archive(archive_file, f"it cannot be opened ({error.strerror or error})") from None
    # Headers, padding and the end marker come on top of the files' own bytes.
    stream = _CountingReader(raw, total_limit + MAX_MEMBERS * 3 * 512 + MAX_TRAILING_BYTES)
    # Only errors in reading the archive are its fault; one in writing the extracted files (a full
    # disk) goes up as it is.
    try:
        with raw, tarfile.open(fileobj=stream, mode="r|", tarinfo=_LimitedTarInfo) as archive:  # type: ignore[call-overload]
            names: Set[str] = set()
            total = 0
            for count, member in enumerate(archive, start=1):
                total += _check_member(archive_file, member, target, names, count, total, total_limit)
                try:
                    archive.extract(member, target, set_attrs=False, **_DATA_FILTER)
                except (NotADirectoryError, IsADirectoryError, FileExistsError):
                    raise _ArchiveRefused(f"its member {shown_name(member.name)} collides with another one (a file "
                                          "where a directory is needed, or the other way round)") from None
                archive.members = []  # a stream needs no index of what it passed
            _check_end(stream)
    except _ArchiveRefused as refused:
        raise unreadable_archive(archive_file, str(refused)) from None
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise unreadable_archive(archive_file, _reading_failure(error)) from None


def _check_member(archive_file: Union[str, Path], member: tarfile.TarInfo, target: Path, names: Set[str],
                  count: int, total: int, total_limit: int) -> int:
    """Refuse `member` if it breaks a limit; the bytes it adds to the total."""
    if count > MAX_MEMBERS:
        raise _ArchiveRefused(f"it holds more than {MAX_MEMBERS:,} members")
    if len(member.name) > MAX_NAME_LENGTH:
        raise _ArchiveRefused(f"it holds a member named {shown_name(member.name)}, longer than {MAX_NAME_LENGTH} characters")
    destination = (target / member.name).resolve()
    if not (member.isfile() or member.isdir()) or os.path.commonpath([target, destination]) != str(target):
        raise ConfigurationError(
            f"{archive_file}: refusing to extract {shown_name(member.name)}: it is not a plain file or directory "
            f"inside the archive's folder."
        )
    relative = destination.relative_to(target).as_posix()
    if relative in names:
        raise _ArchiveRefused(f"it holds {shown_name(relative)} twice (which copy counts would be a guess)")
    names.add(relative)
    size = member.size if member.isfile() else 0
    limit = MAX_JSON_BYTES if relative.endswith(".json") else MAX_MEMBER_BYTES
    if relative != WEIGHTS_MEMBER and size > limit:
        raise _ArchiveRefused(f"its member {shown_name(relative)} holds {size:,} bytes, more than the "
                              f"{limit:,} allowed for {'a JSON file' if limit == MAX_JSON_BYTES else 'anything but ' + WEIGHTS_MEMBER}")
    free = shutil.disk_usage(target).free
    if size + LOW_SPACE_BYTES > free:
        raise StorageFailure(
            f"Extracting {archive_file} needs {size:,} bytes for {shown_name(relative)}, but the temporary directory "
            f"{target.parent} has {free:,} free. Free disk space there, or point TMPDIR at a larger disk."
        )
    if total + size > total_limit:
        raise _ArchiveRefused(f"its files hold more than its size limit of {total_limit:,} bytes "
                              f"(set {MAX_SIZE_ENV} to allow more)")
    return size


def _check_end(stream: _CountingReader) -> None:
    """After the end-of-archive marker, only zero padding and the gzip trailer (its checksum catches
    damaged data); reading stops there, whatever follows."""
    trailing = stream.stream.read(MAX_TRAILING_BYTES + 1)
    if len(trailing) > MAX_TRAILING_BYTES or trailing.strip(b"\0"):
        raise _ArchiveRefused("it holds data after the tar's end-of-archive marker")


def unreadable_archive(archive_file: Union[str, Path], reason: str) -> ConfigurationError:
    """The error for a file given as an archive that cannot be one."""
    return ConfigurationError(
        f"{archive_file} is not a readable model archive: {reason}. A model archive is the model.tar.gz "
        f"that `ipuflow train` writes (or the run directory that holds it); this file may be truncated, "
        f"damaged in transfer, or something else."
    )


def _reading_failure(error: BaseException) -> str:
    detail = str(error) or type(error).__name__
    if len(detail) > 200:
        detail = detail[:200] + "…"
    if isinstance(error, EOFError) or "unexpected end" in detail:
        return f"it ends too early ({detail})"
    if "empty file" in detail:
        return "it is empty"
    if isinstance(error, gzip.BadGzipFile) and "not a gzipped file" in detail.lower():
        return "it is not a gzip-compressed file"
    if isinstance(error, (zlib.error, gzip.BadGzipFile)):
        return f"its compressed data is damaged ({detail})"
    return f"it is not a tar archive ({detail})"

