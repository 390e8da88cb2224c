"""A small BERT-style classifier and random data, shared by the executor and trainer benchmarks.

Hidden 128, 2 layers, 2 heads, sequence 64, random init, plain torch. `BertStyleClassifier` is a
`Model`: forward(tokens, tokens_mask, label) → {"logits", "loss"}.
"""

from __future__ import annotations

from typing import Dict, List

import numpy
import torch

from ipuflow.models.model import IGNORE_LABEL, Model

VOCAB = 1000
HIDDEN = 128
LAYERS = 2
HEADS = 2
SEQUENCE = 64
BATCH = 32
CLASSES = 2


class BertStyleClassifier(Model):
    """Token + position embeddings, a post-norm transformer encoder, mean pooling, a linear head."""

    def __init__(self, vocab: int = VOCAB, hidden: int = HIDDEN, layers: int = LAYERS, heads: int = HEADS,
                 sequence: int = SEQUENCE, classes: int = CLASSES) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, hidden)
        self.positions = torch.nn.Embedding(sequence, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, dim_feedforward=4 * hidden, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(hidden, classes)
        self.register_buffer("position_ids", torch.arange(sequence), persistent=False)

    def forward(self, tokens: torch.Tensor, tokens_mask: torch.Tensor, label: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        length = tokens.shape[1]
        hidden = self.norm(self.tokens(tokens) + self.positions(self.position_ids[:length]))
        hidden = self.encoder(hidden, src_key_padding_mask=~tokens_mask)
        weights = tokens_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        logits = self.head(pooled)
        loss = torch.nn.functional.cross_entropy(logits, label, ignore_index=IGNORE_LABEL)
        return {"logits": logits, "loss": loss}


def random_instances(count: int, seed: int = 0, sequence: int = SEQUENCE, vocab: int = VOCAB) -> List[Dict[str, object]]:
    """Indexed instances: token-id lists of random length (at most `sequence`) and a binary label."""
    rng = numpy.random.default_rng(seed)
    lengths = rng.integers(sequence // 4, sequence + 1, size=count)
    return [{"tokens": rng.integers(1, vocab, size=int(length)).tolist(), "label": int(rng.integers(0, CLASSES))} for length in lengths]


def random_batch(rows: int = BATCH, seed: int = 0, sequence: int = SEQUENCE, vocab: int = VOCAB) -> Dict[str, torch.Tensor]:
    """One padded batch of `rows` random rows, shaped as the fixed-shape loader makes them."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(sequence // 4, sequence + 1, (rows,), generator=generator)
    mask = torch.arange(sequence)[None, :] < lengths[:, None]
    tokens = torch.randint(1, vocab, (rows, sequence), generator=generator) * mask
    return {"tokens": tokens, "tokens_mask": mask, "label": torch.randint(0, CLASSES, (rows,), generator=generator)}
