"""Turning instances (from any reader's `_read`) into field batches for a columnar builder."""

from __future__ import annotations

from typing import Dict, Sequence

import numpy

from ipuflow.config import ConfigurationError
from ipuflow.data.columnar.builder import INTS, JSON_VALUES, LABELS, TOKEN_IDS, TOKENS, VECTORS, FieldBatch
from ipuflow.data.fields import LabelField, MetadataField, TensorField, TextField
from ipuflow.data.instance import Instance


def field_batches_from_instances(instances: Sequence[Instance], metadata: bool = False) -> Dict[str, FieldBatch]:
    """The fields of `instances` as column batches; metadata fields only if `metadata` (they never
    enter a batch: only postprocessors read them)."""
    first = instances[0]
    batches: Dict[str, FieldBatch] = {}
    for name, field in first.fields.items():
        column = [instance.fields[name] for instance in instances]
        if isinstance(field, MetadataField):
            if metadata:
                batches[name] = FieldBatch(JSON_VALUES, [f.value for f in column])  # type: ignore[attr-defined]
            continue
        if isinstance(field, TextField):
            if field.token_ids is not None:
                batches[name] = FieldBatch(TOKEN_IDS, [f.token_ids for f in column])  # type: ignore[attr-defined]
            else:
                batches[name] = FieldBatch(TOKENS, [f.tokens for f in column], field.namespace)  # type: ignore[attr-defined]
        elif isinstance(field, LabelField):
            if field.skip_indexing:
                batches[name] = FieldBatch(INTS, [int(f.label) for f in column])  # type: ignore[attr-defined]
            else:
                batches[name] = FieldBatch(LABELS, [f.label for f in column], field.namespace)  # type: ignore[attr-defined]
        elif isinstance(field, TensorField):
            batches[name] = FieldBatch(VECTORS, numpy.stack([f.values for f in column]))  # type: ignore[attr-defined]
        else:
            raise ConfigurationError(f"Field {name!r} is a {type(field).__name__}, which a columnar dataset cannot hold.")
    return batches

