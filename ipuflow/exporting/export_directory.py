"""What an `export-pretrained` directory is, and when an export may replace one: only a directory
that an earlier export wrote (it holds `EXPORT_MARKER`), and never a home, a filesystem root, the
working directory or one above it, or the directory of the archive being exported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Set

from ipuflow.config import ConfigurationError
from ipuflow.version import VERSION

EXPORT_MARKER = "ipuflow-export.json"
"""The file every export directory holds: the ipuflow version, the archive and the names of the
files the export wrote, so that `--overwrite` replaces only what ipuflow created."""


def write_export_marker(directory: Path, archive: str) -> None:
    """Record in `directory` (a complete export) that ipuflow wrote it, and which files it wrote."""
    files = sorted(entry.name for entry in directory.iterdir() if entry.name != EXPORT_MARKER)
    marker = {"ipuflow_version": VERSION, "archive": archive, "files": files}
    (directory / EXPORT_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def refuse_replacing(target: Path, archive: Path, overwrite: bool) -> None:
    """A clear error unless an export may be written to `target`: a new or empty directory, or with
    `overwrite` an earlier export holding nothing but what that export wrote."""
    from ipuflow.experiment.serialization_dir import protected_reason

    resolved = target.resolve()
    reason = protected_reason(resolved) or _holds_the_archive(resolved, archive.resolve())
    if reason:
        raise ConfigurationError(
            f"export-pretrained refuses to write to {target}: it is {reason}. An export replaces its directory "
            "whole; give it a directory of its own (a new one, or an earlier export)."
        )
    if target.exists() and not target.is_dir():
        raise ConfigurationError(f"{target} is a file, not a directory; choose another directory for the export.")
    found = sorted(entry.name for entry in target.iterdir()) if target.is_dir() else []
    if not found:
        return
    if not overwrite:
        raise ConfigurationError(f"{target} already exists and is not empty; choose another directory or pass "
                                 "--overwrite.")
    written = _files_of_earlier_export(target)
    if written is None:
        raise ConfigurationError(
            f"--overwrite refuses to replace {target}: it is not an earlier export of ipuflow (it has no valid "
            f"{EXPORT_MARKER}; it holds {_listed(found)}). --overwrite replaces only a directory that "
            "export-pretrained wrote; choose a new directory, or remove these files yourself."
        )
    added = [name for name in found if name not in written and name != EXPORT_MARKER]
    if added:
        raise ConfigurationError(
            f"--overwrite refuses to replace {target}: besides an earlier export it holds {_listed(added)}, which "
            "ipuflow did not write. Move them away, or choose another directory."
        )


def _holds_the_archive(resolved: Path, archive: Path) -> str:
    """Why replacing `resolved` would delete the archive being exported or its run directory, or ''."""
    run_directory = archive if archive.is_dir() else archive.parent
    if resolved == run_directory:
        return f"the run directory of the archive {archive}"
    if resolved in archive.parents:
        return f"a directory that holds the archive {archive}"
    return ""


def _files_of_earlier_export(directory: Path) -> Optional[Set[str]]:
    """The names an earlier export recorded in its marker, or None if `directory` has no valid one."""
    try:
        marker = json.loads((directory / EXPORT_MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        return None
    return set(files)


def _listed(names: List[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
