"""ROUGE of the lead baseline on a seq2seq JSON-lines file: each source's first sentence (or first
N words) taken as its generated text, scored against the target as `generation_scores` scores a model.

Usage: python scripts/lead_baseline.py data/bbc_headlines/test.jsonl [--words N]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ipuflow.evaluation.generation_scores import score_texts

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def lead(source: str, words: int) -> str:
    """The first sentence of `source`, or its first `words` words when `words` is given."""
    if words:
        return " ".join(source.split()[:words])
    return SENTENCE_END.split(source.strip(), maxsplit=1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--words", type=int, default=0, help="take the first N words instead of the first sentence")
    parser.add_argument("--source-key", default="source")
    parser.add_argument("--target-key", default="target")
    arguments = parser.parse_args()
    rows = [json.loads(line) for line in arguments.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    generated = [lead(row[arguments.source_key], arguments.words) for row in rows]
    metrics = score_texts(generated, [row[arguments.target_key] for row in rows])
    print(json.dumps({"examples": len(rows), **{key: round(value, 4) for key, value in metrics.items()}}, indent=2))


if __name__ == "__main__":
    main()
