"""Pretrained word vectors (GloVe's text format) as the starting weights of a token embedding."""

from __future__ import annotations

import logging
from typing import Dict, Mapping, Optional

import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.word_vector_files import word_vector_lines

logger = logging.getLogger(__name__)


def read_word_vectors(location: str, words: Mapping[str, int], dim: int, key: str = "pretrained_file") -> Dict[int, torch.Tensor]:
    """The vectors of `words` (word → row) that the file at `location` holds, by row. The first
    vector must have `dim` values; later lines of another length are skipped (GloVe's Common Crawl
    file has a few words holding spaces), as AllenNLP skips them. Only the vocabulary's words are
    parsed, so GloVe's 2.2 million lines cost one pass over the file."""
    vectors: Dict[int, torch.Tensor] = {}
    skipped = 0
    for number, fields in word_vector_lines(location, key):
        if len(fields) - 1 != dim:
            if not vectors and not skipped:
                raise ConfigurationError(
                    f"line {number} of {location} holds {len(fields) - 1} values after its word, but the model's "
                    f"embedding_dim is {dim}: give a file of that dimension or set embedding_dim to the file's.",
                    key=key)
            skipped += 1
            continue
        row = words.get(fields[0])
        if row is not None and row not in vectors:
            try:
                vectors[row] = torch.tensor([float(value) for value in fields[1:]])
            except ValueError:
                raise ConfigurationError(f"line {number} of {location} ({fields[0]!r}) holds a value that is not a "
                                         "number.", key=key) from None
    if skipped:
        logger.warning("%s: %d lines with another number of values than %d were skipped.", location, skipped, dim)
    return vectors


def pretrained_embedding_matrix(location: str, words: Mapping[str, int], rows: int, dim: int,
                                padding_row: Optional[int] = 0, key: str = "pretrained_file") -> torch.Tensor:
    """A `[rows, dim]` embedding matrix: the file's vector for each of `words` it holds, and for the
    others random values with the mean and standard deviation of those found (AllenNLP's choice,
    so that they sit among the pretrained ones); `padding_row` is zeros."""
    found = read_word_vectors(location, words, dim, key)
    if not found:
        sample = ", ".join(repr(word) for word in list(words)[2:7])
        raise ConfigurationError(
            f"none of the vocabulary's {len(words)} words ({sample}, ...) has a vector in {location}: is it the "
            "right file, and does the tokenizer's casing (lowercase) match the file's?", key=key)
    known = torch.stack(list(found.values()))
    std = known.std().item() if known.numel() > 1 else 1.0
    matrix = torch.empty(rows, dim).normal_(known.mean().item(), std)
    for row, vector in found.items():
        matrix[row] = vector
    if padding_row is not None:
        matrix[padding_row] = 0.0
    logger.info("%s: pretrained vectors for %d of %d vocabulary words; the others start random.", location,
                len(found), len(words))
    return matrix
