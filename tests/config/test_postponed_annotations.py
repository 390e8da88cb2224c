"""The resolver reads string annotations (`from __future__ import annotations`) as real types."""

from __future__ import annotations

from typing import Dict, List, Optional

from ipuflow.config import FromParams, Lazy, Params


class Part(FromParams):
    def __init__(self, size: int = 1) -> None:
        self.size = size


class Whole(FromParams):
    def __init__(self, part: Part, parts: List[Part] = (), lazy: Lazy[Part] = None,
                 optional_lazy: Optional[Lazy[Part]] = None, named: Optional[Dict[str, Part]] = None) -> None:
        self.part, self.parts, self.lazy, self.optional_lazy, self.named = part, parts, lazy, optional_lazy, named


def test_string_annotations_resolve_to_nested_objects_and_lazies():
    whole = Whole.from_params(Params({
        "part": {"size": 2}, "parts": [{}], "lazy": {"size": 3}, "optional_lazy": {}, "named": {"a": {"size": 4}},
    }))
    assert isinstance(whole.part, Part) and whole.part.size == 2
    assert isinstance(whole.parts[0], Part)
    assert isinstance(whole.lazy, Lazy) and whole.lazy.construct().size == 3
    assert isinstance(whole.optional_lazy, Lazy)
    assert whole.named["a"].size == 4
