"""Write scikit-learn's bundled handwritten digits as train/validation/test JSON lines.

Usage: python scripts/prepare_digits.py [--output-dir data/digits] [--seed 13]

`sklearn.datasets.load_digits` reads a file shipped inside scikit-learn (no download): 1,797 8×8
images with pixel values 0–16. Each line is `{"features": [64 floats in 0..1], "label": d}`: the
pixels are divided by 16 so that a network needs no further scaling. The split is 80/10/10,
stratified by digit, with a fixed seed.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    """Convert and write the three splits."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "digits")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    digits = load_digits()
    features = (digits.data / 16.0).tolist()
    labels = digits.target.tolist()
    train_x, rest_x, train_y, rest_y = train_test_split(
        features, labels, test_size=0.2, stratify=labels, random_state=args.seed
    )
    validation_x, test_x, validation_y, test_y = train_test_split(
        rest_x, rest_y, test_size=0.5, stratify=rest_y, random_state=args.seed
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, xs, ys in (("train", train_x, train_y), ("validation", validation_x, validation_y), ("test", test_x, test_y)):
        with open(args.output_dir / f"{name}.jsonl", "w", encoding="utf-8", newline="\n") as file:
            for x, y in zip(xs, ys):
                # Pixels/16 are exact binary fractions, so repr gives short, lossless numbers.
                file.write(json.dumps({"features": x, "label": int(y)}, separators=(",", ":")) + "\n")
        print(f"{name}: {len(ys)} images, per digit {dict(sorted(Counter(ys).items()))}")


if __name__ == "__main__":
    main()
