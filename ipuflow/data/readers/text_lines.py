"""Reading a text file line by line as UTF-8, so that a decoding error names the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Generator, Union

from ipuflow.config import ConfigurationError


def utf8_lines(path: Union[str, Path]) -> Generator[str, None, None]:
    """The lines of the file at `path` (line endings kept, as with ``newline=""``), each decoded as
    UTF-8; bytes that are not UTF-8 are an error naming the file, the line and the column."""
    with open(path, "rb") as file:
        yield from utf8_stream_lines(file, str(path))


def utf8_stream_lines(stream: BinaryIO, name: str) -> Generator[str, None, None]:
    """The lines of a binary `stream` (a file, stdin's buffer) decoded as UTF-8; bytes that are not
    UTF-8 are an error naming `name`, the line and the column."""
    for line_number, raw in enumerate(stream, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ConfigurationError(
                f"{name}:{line_number}: not UTF-8 text ({error.reason}: byte {raw[error.start:error.start + 1]!r} "
                f"at column {error.start + 1}). Convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`."
            ) from None
