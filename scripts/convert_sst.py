"""Convert Stanford Sentiment Treebank trees (AllenNLP's `sst_tokens` input) to JSON lines.

Usage: python scripts/convert_sst.py TREES.txt OUT.jsonl [--granularity 2-class] [--use-subtrees]

Each input line is one sentence as a bracketed tree whose nodes carry a sentiment from 0 (very
negative) to 4 (very positive): `(3 (2 It) (4 (4 works) (2 .)))`. Each output line is
`{"text": "It works .", "label": "1"}`, for ipuflow's `text_classification_json` reader with a
`whitespace` tokenizer. The options mean what the `sst_tokens` reader's keys of the same names do:
`--granularity` 5-class keeps the labels 0-4, 3-class maps them to 0 (negative), 1 (neutral),
2 (positive), 2-class drops neutral phrases and maps the rest to 0 and 1; `--use-subtrees` writes
every phrase of the tree (SST's usual training set), not only whole sentences.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
GRANULARITIES = ("5-class", "3-class", "2-class")


def phrases(tree: str) -> List[Tuple[int, str]]:
    """Every node of a bracketed tree as (sentiment, its words), the whole sentence last."""
    found: List[Tuple[int, str]] = []
    stack: List[Tuple[int, List[str]]] = []
    tokens = _TOKEN.findall(tree)
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == "(":
            stack.append((int(tokens[position + 1]), []))
            position += 2
            continue
        if token == ")":
            label, words = stack.pop()
            found.append((label, " ".join(words)))
            if stack:
                stack[-1][1].extend(words)
        else:
            stack[-1][1].append(token)
        position += 1
    if stack or not found:
        raise ValueError(f"not a complete bracketed tree: {tree[:80]!r}")
    return found


def coarse_label(sentiment: int, granularity: str) -> Optional[str]:
    """The label of a 0-4 sentiment at `granularity`; None for a neutral phrase in 2-class."""
    if granularity == "5-class":
        return str(sentiment)
    if sentiment == 2:
        return "1" if granularity == "3-class" else None
    return ("0" if sentiment < 2 else "2") if granularity == "3-class" else ("0" if sentiment < 2 else "1")


def convert(lines: Iterator[str], granularity: str, use_subtrees: bool) -> Iterator[dict]:
    """The JSON records of the trees in `lines`."""
    for line in lines:
        if not line.strip():
            continue
        nodes = phrases(line)
        for sentiment, text in nodes if use_subtrees else nodes[-1:]:
            label = coarse_label(sentiment, granularity)
            if label is not None:
                yield {"text": text, "label": label}


def main() -> None:
    """Convert one file of trees."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--granularity", choices=GRANULARITIES, default="5-class")
    parser.add_argument("--use-subtrees", action="store_true")
    args = parser.parse_args()
    with args.trees.open(encoding="utf-8") as trees, args.output.open("w", encoding="utf-8") as output:
        count = 0
        for record in convert(trees, args.granularity, args.use_subtrees):
            output.write(json.dumps(record) + "\n")
            count += 1
    print(f"{args.output}: {count} examples")


if __name__ == "__main__":
    main()
