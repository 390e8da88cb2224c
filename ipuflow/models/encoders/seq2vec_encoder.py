"""The Seq2VecEncoder base class: a sequence of vectors in, one vector per sequence out."""

from __future__ import annotations

import torch

from ipuflow.config import Registrable


class Seq2VecEncoder(torch.nn.Module, Registrable):
    """Encodes `inputs` `[batch, length, input_dim]` with a bool `mask` `[batch, length]` (true for
    real tokens, which come first in each row) into `[batch, output_dim]`. Built-ins:
    `bag_of_embeddings` (the default), `cnn`, `lstm`.

    A row whose mask is all false (a row padded onto the batch axis) gives finite values.
    """

    default_implementation = "bag_of_embeddings"

    def get_input_dim(self) -> int:
        """The size of each input vector."""
        raise NotImplementedError

    def get_output_dim(self) -> int:
        """The size of the output vector."""
        raise NotImplementedError

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The encoding of each sequence."""
        raise NotImplementedError
