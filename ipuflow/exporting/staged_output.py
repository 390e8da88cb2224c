"""Writing an export's file under a name of ipuflow's own, and putting it in place only once it has
passed every check: a failed check, an interruption or a full disk leaves the user's previous file
as it was and no partial one."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from ipuflow.config import ConfigurationError
from ipuflow.storage.atomic import sync_directory
from ipuflow.storage.failures import disk_nearly_full, is_storage_failure, storage_failure

EXTERNAL_DATA_SUFFIX = ".data"
"""The suffix of an ONNX file's external-data file (`model.onnx.data`), which moves with it."""


@contextlib.contextmanager
def staged_output(output: Path) -> Iterator[Path]:
    """A path named like `output` inside a new directory of ipuflow's own beside it (on the same file
    system, so that `publish` renames); the directory and whatever the export and its tools wrote in
    it (onnxruntime's `*-inferred.onnx`, fusion and quantization scratch files) go on the way out."""
    if output.is_dir() and not output.is_symlink():
        raise ConfigurationError(f"{output} is a directory; give -o the path of the ONNX file to write.")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".export", dir=output.parent))
    except OSError as error:  # the export needs a directory of its own beside FILE: say where it failed
        raise storage_failure(error, output.parent) from error
    try:
        yield staging / output.name
    except (OSError, RuntimeError) as error:
        # Judged before the staged files are removed, while the disk is still as full as it was.
        if is_storage_failure(error) or disk_nearly_full(staging):
            raise storage_failure(error, output) from error
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staged: Path, output: Path) -> None:
    """Put the checked `staged` file (and its external data, if any) at `output`, each synced to disk
    first and renamed over what was there. A symbolic link at `output` is replaced by the file; what
    it pointed to is left as it was."""
    for suffix in (EXTERNAL_DATA_SUFFIX, ""):  # the data first: the model never names missing data
        source = staged.with_name(staged.name + suffix)
        if not source.exists():
            continue
        with open(source, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(source, output.with_name(output.name + suffix))
    sync_directory(output.parent)
