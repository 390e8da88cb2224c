"""The `lstm` encoder: the final states of a (bidirectional) LSTM over the real tokens."""

from __future__ import annotations

import torch

from ipuflow.config import validators
from ipuflow.models.encoders.seq2vec_encoder import Seq2VecEncoder


@Seq2VecEncoder.register("lstm")
class LstmEncoder(Seq2VecEncoder):
    """An LSTM of `num_layers` layers of `hidden_size` units; the encoding is the last real token's
    state (and, if `bidirectional`, the backward direction's state at the first token).

    The result equals a PyTorch LSTM run on packed sequences, but uses no packing: packing needs the
    lengths on the host (a device sync) and gives data-dependent shapes, which compiled steps
    cannot have. The backward direction runs on each row reversed within its length instead, so
    padding never flows into real states. Under `torch.compile` each `nn.LSTM` call is a graph
    break unless `torch._dynamo.config.allow_rnn` is set (then the whole forward compiles).
    """

    def __init__(
        self,
        input_dim: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        validators.positive_int("num_layers", num_layers)
        validators.probability("dropout", dropout)
        self.input_dim = input_dim
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        directions = 2 if bidirectional else 1
        layer_inputs = [input_dim] + [hidden_size * directions] * (num_layers - 1)
        self.forward_layers = torch.nn.ModuleList(
            torch.nn.LSTM(size, hidden_size, batch_first=True) for size in layer_inputs
        )
        self.backward_layers = torch.nn.ModuleList(
            torch.nn.LSTM(size, hidden_size, batch_first=True) for size in (layer_inputs if bidirectional else [])
        )
        self.dropout = torch.nn.Dropout(dropout)

    def get_input_dim(self) -> int:
        """The size of each input vector."""
        return self.input_dim

    def get_output_dim(self) -> int:
        """`hidden_size`, twice if bidirectional."""
        return self.hidden_size * (2 if self.bidirectional else 1)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The final states of each row."""
        length = inputs.shape[1]
        lengths = mask.sum(dim=1, keepdim=True)  # [batch, 1]
        positions = torch.arange(length, device=inputs.device).unsqueeze(0)
        # Position t of a reversed row holds token length-1-t; padding stays where it is. The
        # permutation is its own inverse, so it also puts reversed outputs back in order.
        reverse = torch.where(positions < lengths, lengths - 1 - positions, positions)
        last = (lengths - 1).clamp(min=0)  # [batch, 1]; a row of padding only reads position 0

        layer_input = inputs
        forward_states = backward_states = layer_input
        for index, forward_layer in enumerate(self.forward_layers):
            if index > 0:
                layer_input = self.dropout(layer_input)
            forward_states, _ = forward_layer(layer_input)
            if not self.bidirectional:
                layer_input = forward_states
                continue
            backward_reversed, _ = self.backward_layers[index](_gather_time(layer_input, reverse))
            backward_states = _gather_time(backward_reversed, reverse)
            layer_input = torch.cat([forward_states, backward_states], dim=-1)

        final = _gather_time(forward_states, last).squeeze(1)
        if self.bidirectional:
            final = torch.cat([final, backward_states[:, 0]], dim=-1)
        return final


def _gather_time(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`values[b, index[b, t]]` for `values` `[batch, length, dim]` and `index` `[batch, t]`."""
    return values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.shape[-1]))
