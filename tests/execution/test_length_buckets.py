"""Executors and bucketed loaders: `prepare` (through `compile_for`) compiles every bucket's shape up front."""

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
    instances = [{"tokens": list(range(1, 1 + length)), "label": length % 2} for length in (2, 3, 1, 4, 9, 12, 5, 14)]
    return FixedShapeDataLoader(instances, batch_size=2, length_buckets=[4, 8, 16], padding="fixed")


def test_prepare_accepts_every_bucket_of_the_loader(build, backend):
    model = MeanTokens()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), device_iterations=2)
    loader = bucketed_loader()
    if backend == "poptorch":
        with pytest.raises(ValueError, match="one executable"):
            executor.prepare(loader)
        return
    executor.prepare(loader)
    assert loader.batch_size_factor == 2 and loader.combined_batch_size == 4
    assert all(executor.accepts(sample) for sample in loader.shape_samples())
    shapes = {tuple(batch["tokens"].shape) for batch in loader}
    assert len(shapes) > 1
    for batch in loader:
        assert executor(batch).optimizer_updates == 2
    executor.prepare(loader)  # already compiled: nothing to do, no warning


def test_prepare_without_compiling_only_sets_the_factor(build):
    model = MeanTokens()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1), device_iterations=2)
    loader = bucketed_loader()
    executor.prepare(loader, compile=False)
    assert loader.combined_batch_size == 4 and len(loader) == 2
    assert not executor.is_compiled


def test_without_compile_for_a_later_bucket_is_rejected(build, backend):
    model = MeanTokens()
    executor = build(model, torch.optim.SGD(model.parameters(), lr=0.1))
    batches = list(bucketed_loader())
    executor(batches[0])
    with pytest.raises(ValueError, match="mismatch"):
        for batch in batches[1:]:
            executor(batch)
