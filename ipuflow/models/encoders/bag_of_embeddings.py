"""The `bag_of_embeddings` encoder: the (masked) sum or mean of the input vectors."""

from __future__ import annotations

import torch

from ipuflow.models.encoders.seq2vec_encoder import Seq2VecEncoder


@Seq2VecEncoder.register("bag_of_embeddings")
class BagOfEmbeddingsEncoder(Seq2VecEncoder):
    """Sums the vectors of the real tokens, and divides by their number if `averaged`."""

    def __init__(self, input_dim: int, averaged: bool = True) -> None:
        super().__init__()
        self.input_dim = input_dim
        self.averaged = averaged

    def get_input_dim(self) -> int:
        """The size of each input vector."""
        return self.input_dim

    def get_output_dim(self) -> int:
        """The same as the input size."""
        return self.input_dim

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The sum or mean of each row's real token vectors."""
        weights = mask.unsqueeze(-1).to(inputs.dtype)
        summed = (inputs * weights).sum(dim=1)
        if not self.averaged:
            return summed
        # clamp: a row of padding only would divide by zero.
        return summed / weights.sum(dim=1).clamp(min=1.0)
