"""Shared pieces for model tests: a small vocabulary and batches shaped like the loader's."""

from typing import Dict

import pytest
import torch

from ipuflow.data import Vocabulary
from ipuflow.models import IGNORE_LABEL


@pytest.fixture
def vocab() -> Vocabulary:
    return Vocabulary(tokens_to_add={"tokens": ["good", "bad", "film", "plot"], "labels": ["fresh", "rotten"]})


@pytest.fixture
def text_batch() -> Dict[str, torch.Tensor]:
    """Three real rows (ids 2-5; 0 pads) and one row padded onto the batch axis."""
    tokens = torch.tensor([[2, 4, 0, 0, 0], [3, 5, 4, 0, 0], [2, 2, 4, 5, 3], [0, 0, 0, 0, 0]])
    return {"tokens": tokens, "tokens_mask": tokens != 0, "label": torch.tensor([0, 1, 0, IGNORE_LABEL])}
