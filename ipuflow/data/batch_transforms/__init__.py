"""Changes made to each collated batch on the host, each with its own seeded random stream
(`BatchTransform`), such as masking tokens for masked language modelling (`MaskedLanguageModelling`)."""

from ipuflow.data.batch_transforms.batch_transform import BatchTransform
from ipuflow.data.batch_transforms.masked_language_modelling import MaskedLanguageModelling

__all__ = ["BatchTransform", "MaskedLanguageModelling"]
