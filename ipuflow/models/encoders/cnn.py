"""The `cnn` encoder: n-gram convolutions, max-pooled over the sequence."""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ipuflow.config import validators
from ipuflow.models.activations import activation_by_name
from ipuflow.models.encoders.seq2vec_encoder import Seq2VecEncoder


@Seq2VecEncoder.register("cnn")
class CnnEncoder(Seq2VecEncoder):
    """One 1-d convolution of `num_filters` filters per n-gram size, an activation, and a max over
    the windows that start inside the text (a text shorter than n gets one window); the pooled
    features are concatenated and, if `output_dim` is given, projected to it."""

    def __init__(
        self,
        input_dim: int,
        num_filters: int = 100,
        ngram_filter_sizes: Sequence[int] = (2, 3, 4, 5),
        conv_layer_activation: str = "relu",
        output_dim: Optional[int] = None,
    ) -> None:
        super().__init__()
        validators.positive_ints("ngram_filter_sizes", ngram_filter_sizes)
        self.input_dim = input_dim
        self.ngram_filter_sizes = tuple(ngram_filter_sizes)
        self.convolutions = torch.nn.ModuleList(
            torch.nn.Conv1d(input_dim, num_filters, kernel_size=size) for size in self.ngram_filter_sizes
        )
        self.activation = activation_by_name(conv_layer_activation, "conv_layer_activation")
        pooled_dim = num_filters * len(self.ngram_filter_sizes)
        self.projection = torch.nn.Linear(pooled_dim, output_dim) if output_dim is not None else None
        self.output_dim = output_dim if output_dim is not None else pooled_dim

    def get_input_dim(self) -> int:
        """The size of each input vector."""
        return self.input_dim

    def get_output_dim(self) -> int:
        """The pooled size, or `output_dim`."""
        return self.output_dim

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The max-pooled n-gram features of each row."""
        inputs = inputs * mask.unsqueeze(-1).to(inputs.dtype)
        channels_first = inputs.transpose(1, 2)  # Conv1d wants [batch, dim, length]
        shortfall = max(self.ngram_filter_sizes) - channels_first.shape[-1]
        if shortfall > 0:  # a static shape decision: sequences shorter than the widest filter
            channels_first = torch.nn.functional.pad(channels_first, (0, shortfall))
        lengths = mask.sum(dim=1, keepdim=True)
        pooled = []
        for size, convolution in zip(self.ngram_filter_sizes, self.convolutions):
            features = self.activation(convolution(channels_first))  # [batch, filters, windows]
            starts = torch.arange(features.shape[-1], device=features.device).unsqueeze(0)
            # A window is real if it ends inside the text; the first one always counts.
            real = (starts + size <= lengths) | (starts == 0)
            features = features.masked_fill(~real.unsqueeze(1), torch.finfo(features.dtype).min)
            pooled.append(features.max(dim=-1).values)
        output = torch.cat(pooled, dim=-1)
        return self.projection(output) if self.projection is not None else output
