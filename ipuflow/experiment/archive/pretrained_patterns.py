"""The regexes of an archive's pretrained tokenizer (`tokenizer.json`): only the ones transformers
ships.

A fast tokenizer's pre-tokenizer `Split` and normalizer `Replace` patterns run inside the Rust
`tokenizers` library, which has no time limit (a crafted one took 48 s on 1.6 KB, another ends in a
Rust panic). So an archive's copy may hold only patterns that transformers itself writes when it
converts a tokenizer (read from its `convert_slow_tokenizer` module), or an alternation of plain
strings (how it isolates a SentencePiece model's own pieces); any other is refused before the
tokenizer is loaded.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, FrozenSet, Iterator, Set, Tuple

from ipuflow.config import ConfigurationError

TOKENIZER_FILE = "tokenizer.json"
_PLAIN_ALTERNATION = re.compile(r"(?:[^\\.^$*+?{}\[\]()|]|\\[^A-Za-z0-9])+(?:\|(?:[^\\.^$*+?{}\[\]()|]|\\[^A-Za-z0-9])+)*")
"""Literal strings (metacharacters escaped) joined by `|`: matching them cannot backtrack."""


@functools.lru_cache(maxsize=1)
def shipped_patterns() -> FrozenSet[str]:
    """The regexes transformers' tokenizer converters write: the string given to each `Regex(...)`
    and each `pattern` default or keyword in `transformers.convert_slow_tokenizer`."""
    spec = importlib.util.find_spec("transformers.convert_slow_tokenizer")
    if spec is None or spec.origin is None:
        return frozenset()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found: Set[Any] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Regex":
            found.update(arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
        if isinstance(node, ast.keyword) and node.arg == "pattern" and isinstance(node.value, ast.Constant):
            found.add(node.value.value)
        if isinstance(node, ast.arguments):
            named = node.args[len(node.args) - len(node.defaults):] if node.defaults else []
            found.update(default.value for arg, default in zip(named, node.defaults)
                         if arg.arg == "pattern" and isinstance(default, ast.Constant))
    return frozenset(value for value in found if isinstance(value, str))


def _regexes(value: Any, path: str) -> Iterator[Tuple[str, str]]:
    """Each `{"Regex": pattern}` in a tokenizer.json value, with where it is."""
    if isinstance(value, dict):
        if set(value) == {"Regex"}:
            yield path, value["Regex"]
            return
        for key, entry in value.items():
            yield from _regexes(entry, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            yield from _regexes(entry, f"{path}.{index}")


def check_tokenizer_patterns(copy: Path, source: str) -> None:
    """Refuse the archived tokenizer in `copy` if its tokenizer.json holds a regex transformers does not
    ship (nor a plain alternation of strings)."""
    path = copy / TOKENIZER_FILE
    if not path.is_file():
        return
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigurationError(f"{source}: its pretrained tokenizer {copy.name}/{TOKENIZER_FILE} is not valid JSON "
                                 f"({type(error).__name__}).") from None
    for where, pattern in _regexes(content, ""):
        if isinstance(pattern, str) and (_PLAIN_ALTERNATION.fullmatch(pattern) or pattern in shipped_patterns()):
            continue
        shown = repr(pattern) if len(str(pattern)) <= 120 else repr(str(pattern)[:120]) + "…"
        raise ConfigurationError(
            f"{source}: its pretrained tokenizer {copy.name}/{TOKENIZER_FILE} holds the regex {shown} at {where}, "
            "which is not one that transformers writes. Tokenizer patterns run without a time limit (one that "
            "backtracks can run for minutes or crash), so an archive may hold only the patterns transformers ships. "
            "Use a tokenizer of your own: set the pretrained model's name to a directory you trust with -o/--overrides."
        )
