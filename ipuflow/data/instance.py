"""Instance: one example, a mapping from field names to fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping

from ipuflow.data.fields import Field, VocabCounter

if TYPE_CHECKING:
    from ipuflow.data.vocabulary import Vocabulary


class Instance(Mapping[str, Field]):
    """One example: named fields that count their vocabulary items and index themselves."""

    __slots__ = ("fields",)

    def __init__(self, fields: Dict[str, Field]) -> None:
        self.fields = dict(fields)

    def count_vocab_items(self, counter: VocabCounter) -> None:
        """Add every field's vocabulary items to `counter`."""
        for field in self.fields.values():
            field.count_vocab_items(counter)

    def index(self, vocab: "Vocabulary") -> Dict[str, Any]:
        """The indexed instance: field name → int, list of ints, float32 vector or metadata."""
        return {name: field.index(vocab) for name, field in self.fields.items()}

    def add_field(self, name: str, field: Field) -> None:
        """Add or replace a field."""
        self.fields[name] = field

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}: {field!r}" for name, field in self.fields.items())
        return f"Instance({{{inner}}})"
