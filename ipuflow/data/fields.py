"""Fields: the typed parts of an instance, which count their vocabulary items and index themselves.

An indexed field is what the data loader batches (see the shared data contract): a text field
becomes a list of ints, a label an int, a tensor field a float32 vector, and metadata stays as it is
and never enters a batch.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

import numpy

if TYPE_CHECKING:  # a runtime import would be circular: vocabulary.py imports Instance
    from ipuflow.data.vocabulary import Vocabulary

VocabCounter = Dict[str, Counter]
"""Token counts per vocabulary namespace, as `Vocabulary.from_instances` gathers them."""


class Field:
    """One named part of an instance."""

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Add the vocabulary items this field needs to `counter` (namespace → token → count)."""

    def index(self, vocab: "Vocabulary") -> Any:
        """The field's value as the data loader batches it."""
        raise NotImplementedError


class TextField(Field):
    """A sequence of tokens, indexed through a vocabulary namespace, or already indexed.

    A pretrained tokenizer gives `token_ids` itself; such a field needs no vocabulary.
    """

    __slots__ = ("tokens", "namespace", "token_ids")

    def __init__(self, tokens: Sequence[str], namespace: str = "tokens", token_ids: Optional[Sequence[int]] = None) -> None:
        if token_ids is not None and len(token_ids) != len(tokens):
            raise ValueError(f"TextField got {len(tokens)} tokens but {len(token_ids)} token ids.")
        self.tokens = list(tokens)
        self.namespace = namespace
        self.token_ids = None if token_ids is None else [int(token_id) for token_id in token_ids]

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Counts each token in the field's namespace, unless the field is already indexed."""
        if self.token_ids is None:
            counter.setdefault(self.namespace, Counter()).update(self.tokens)

    def index(self, vocab: "Vocabulary") -> List[int]:
        """The token ids: the given ones, or the vocabulary's (unknown tokens get the OOV id)."""
        if self.token_ids is not None:
            return list(self.token_ids)
        return vocab.get_token_indices(self.tokens, self.namespace)

    def __len__(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"TextField({self.tokens!r}, namespace={self.namespace!r})"


class LabelField(Field):
    """A categorical label: a string indexed through a vocabulary namespace.

    An int label is turned into its string form (digit 3 → "3") so that the vocabulary knows every
    class and predictions read back as the label, unless `skip_indexing`, which takes an int label
    as its own index.
    """

    __slots__ = ("label", "namespace", "skip_indexing")

    def __init__(self, label: Union[str, int], namespace: str = "labels", skip_indexing: bool = False) -> None:
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise ValueError(f"A label must be a string or an int, not {type(label).__name__} ({label!r}).")
        if skip_indexing and not isinstance(label, int):
            raise ValueError(f"A LabelField with skip_indexing needs an int label, not {label!r}.")
        self.label: Union[str, int] = label if skip_indexing else str(label)
        self.namespace = namespace
        self.skip_indexing = skip_indexing

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Counts the label in the field's namespace (unless it is its own index)."""
        if not self.skip_indexing:
            counter.setdefault(self.namespace, Counter())[self.label] += 1  # type: ignore[index]

    def index(self, vocab: "Vocabulary") -> int:
        """The label's id; a label the vocabulary does not know is an error."""
        if self.skip_indexing:
            return int(self.label)
        return vocab.get_token_index(str(self.label), self.namespace)

    def __repr__(self) -> str:
        return f"LabelField({self.label!r}, namespace={self.namespace!r})"


class TensorField(Field):
    """A fixed-length vector of floats (numeric features)."""

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        array = numpy.asarray(values, dtype=numpy.float32)
        if array.ndim != 1:
            raise ValueError(f"A TensorField holds a vector, but got an array of shape {array.shape}.")
        self.values = array

    def index(self, vocab: "Vocabulary") -> numpy.ndarray:
        """The float32 vector itself."""
        return self.values

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"TensorField(<{len(self.values)} floats>)"


class MetadataField(Field):
    """Any value carried along with an instance (such as the raw text); it never enters a batch."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def index(self, vocab: "Vocabulary") -> Any:
        """The value as it is."""
        return self.value

    def __repr__(self) -> str:
        return f"MetadataField({self.value!r})"
