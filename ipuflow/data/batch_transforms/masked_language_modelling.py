"""Masking tokens for masked language modelling, per batch, as BERT and transformers'
`DataCollatorForLanguageModeling` do."""

from __future__ import annotations

from typing import List, Sequence

import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.batch_transforms.batch_transform import Batch, BatchTransform
from ipuflow.data.collate import IGNORE_LABEL

LABELS = "lm_labels"
"""The field the masking adds: each masked position's original id, `IGNORE_LABEL` elsewhere."""
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1
"""Of the chosen positions, 80% become the mask token, 10% a random token, 10% stay (BERT's rule)."""


class MaskedLanguageModelling(BatchTransform):
    """Chooses each real, non-special token of the `field` token-id lists with `probability`; of
    those, 80% become `mask_token_id`, 10% a random id below `vocab_size`, 10% are left as they are.
    Adds `lm_labels`: the original id at chosen positions, `IGNORE_LABEL` elsewhere (so the loss and
    perplexity cover the chosen positions only)."""

    def __init__(self, mask_token_id: int, vocab_size: int, special_ids: Sequence[int], probability: float = 0.15,
                 field: str = "tokens") -> None:
        super().__init__()
        if not 0.0 < probability < 1.0:
            raise ConfigurationError(key="mlm_probability", expected="a number between 0 and 1", found=probability)
        self.mask_token_id = int(mask_token_id)
        self.vocab_size = int(vocab_size)
        self.special_ids: List[int] = sorted({int(special) for special in special_ids})
        self._special = torch.tensor(self.special_ids, dtype=torch.long)  # built once, not per batch
        self.probability = float(probability)
        self.field = field

    def output_fields(self) -> Sequence[str]:
        """`lm_labels`."""
        return (LABELS,)

    def __call__(self, batch: Batch, stream: Sequence[int]) -> Batch:
        """`batch` with its `field` masked and `lm_labels` added (a batch without `field`, such as
        a prompt to fill in, is returned as it is)."""
        tokens = batch.get(self.field)
        if tokens is None:
            return batch
        generator = self.generator(stream)
        candidates = batch[f"{self.field}_mask"] & ~torch.isin(tokens, self._special.to(tokens.dtype))
        chosen = (torch.rand(tokens.shape, generator=generator) < self.probability) & candidates
        action = torch.rand(tokens.shape, generator=generator)
        random_ids = torch.randint(self.vocab_size, tokens.shape, generator=generator, dtype=tokens.dtype)
        masked = torch.where(chosen & (action < MASK_SHARE), self.mask_token_id, tokens)
        masked = torch.where(chosen & (action >= MASK_SHARE) & (action < MASK_SHARE + RANDOM_SHARE), random_ids, masked)
        batch[self.field] = masked
        batch[LABELS] = torch.where(chosen, tokens, IGNORE_LABEL)
        return batch
