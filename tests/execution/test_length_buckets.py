"""Executors and bucketed loaders: `compile_for` prepares every bucket's shape up front."""

from __future__ import annotations

from typing import Dict

import pytest
import torch

from ipuflow.data.loader import FixedShapeDataLoader
from ipuflow.models.model import IGNORE_LABEL, Model


class MeanTokens(Model):
    """Mean of token embeddings → two classes; works at any sequence length."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(30, 4)
        self.out = torch.nn.Linear(4, 2)

    def forward(self, tokens: torch.Tensor, tokens_mask: torch.Tensor, label: torch.Tensor) -> Dict[str, torch.Tensor]:  # type: ignore[override]
        mask = tokens_mask.unsqueeze(-1).float()
        logits = self.out((self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1))
        return {"logits": logits, "loss": torch.nn.functional.cross_entropy(logits, label, ignore_index=IGNORE_LABEL)}


def bucketed_loader() -> FixedShapeDataLoader:
    instances = [{"tokens": list(range(1, 1 + length)), "label": length % 2} for length in (2, 3, 9, 12, 5, 1, 14, 4)]
    return FixedShapeDataLoader(instances, batch_size=2, length_buckets=[4, 8, 16])


def test_compile_for_accepts_every_bucket_of_the_loader(build, backend):
    model = MeanTokens()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    loader = bucketed_loader()
    loader.set_batch_size_factor(executor.batch_size_factor)
    if backend == "poptorch":
        with pytest.raises(ValueError, match="one executable"):
            executor.compile_for(loader)
        return
    executor.compile_for(loader)
    assert all(executor.accepts(sample) for sample in loader.shape_samples())
    shapes = {tuple(batch["tokens"].shape) for batch in loader}
    assert len(shapes) > 1
    for batch in loader:
        assert executor(batch).optimizer_updates == 1
    executor.compile_for(loader)  # already compiled: nothing to do, no warning


def test_without_compile_for_a_later_bucket_is_rejected(build, backend):
    model = MeanTokens()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    batches = list(bucketed_loader())
    executor(batches[0])
    with pytest.raises(ValueError, match="mismatch"):
        for batch in batches[1:]:
            executor(batch)
