"""Reading text files of word vectors (GloVe's format, word2vec's text format), plain or gzipped.

Each line is a word and its values, separated by single spaces (`the 0.418 0.24968 ...`);
word2vec's first line gives the count and the dimension instead. The vocabulary reads the words
(`pretrained_files`), a model's embedding reads the vectors (`pretrained_file`).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, Iterator, List, Tuple, Union

from ipuflow.config import ConfigurationError

WORD_VECTORS = "a local text file of word vectors in GloVe's format (a word and its values per line; .gz allowed)"


def word_vector_file(location: Union[str, Path], key: str) -> Path:
    """The local file at `location`; a URL or a missing file is an error naming `key`."""
    if "://" in str(location):
        raise ConfigurationError(
            "ipuflow downloads nothing: download the file (AllenNLP's GloVe is glove.840B.300d.txt.gz from "
            "https://nlp.stanford.edu/projects/glove/) and give its local path.",
            key=key, expected=WORD_VECTORS, found=str(location))
    path = Path(location).expanduser()
    if not path.is_file():
        problem = "a directory" if path.is_dir() else "no such file"
        raise ConfigurationError(f"{str(path.resolve())!r} is {problem}.", key=key, expected=WORD_VECTORS,
                                 found=str(location))
    return path


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def word_vector_lines(location: Union[str, Path], key: str) -> Iterator[Tuple[int, List[str]]]:
    """Each vector line's number and its fields (the word first), word2vec's header left out."""
    path = word_vector_file(location, key)
    number = 0
    try:
        with _open_text(path) as lines:
            for number, line in enumerate(lines, 1):
                fields = line.rstrip("\r\n ").split(" ")
                if number == 1 and len(fields) == 2 and all(field.isdigit() for field in fields):
                    continue  # word2vec's header: the number of words and the dimension
                yield number, fields
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path} line {number + 1} is not UTF-8 text ({error.reason}).", key=key) from None
