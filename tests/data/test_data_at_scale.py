"""Training on a generated million-line file with bounded memory, and the data cache from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
{
  dataset_reader: { type: "text_classification_json", tokenizer: { type: "regex" }, max_tokens: 16 },
  train_data_path: std.extVar("train"),
  validation_data_path: std.extVar("validation"),
  vocabulary: { min_count: { tokens: 2 } },
  model: { type: "basic_classifier", embedding_dim: 16, encoder: { type: "bag_of_embeddings", averaged: true } },
  data_loader: { batch_size: 2000, shuffle: true, max_length: 16 },
  trainer: { num_epochs: 1, optimizer: { type: "adam", lr: 0.01 }, executor: { type: "native", device: "cpu" } },
}
"""

# Runs `ipuflow train` as the only child of a fresh process, so that the children's peak resident
# memory is that run's alone.
PEAK_OF_CHILD = (
    "import resource, subprocess, sys; "
    "code = subprocess.run(sys.argv[1:]).returncode; "
    "print('PEAK_MB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024); "
    "sys.exit(code)"
)


def write_sentences(path: Path, lines: int, seed: int) -> None:
    """Short sentences of 3-12 words out of 20,000; the label says whether a 'good' word occurs."""
    rng = numpy.random.default_rng(seed)
    words = numpy.array([f"w{index}" for index in range(20_000)])
    with open(path, "w", encoding="utf-8") as file:
        for start in range(0, lines, 100_000):
            count = min(100_000, lines - start)
            lengths = rng.integers(3, 13, size=count)
            ids = rng.integers(0, len(words), size=int(lengths.sum()))
            cuts = numpy.cumsum(lengths)[:-1]
            for sentence in numpy.split(ids, cuts):
                label = "pos" if (sentence < 2000).any() else "neg"
                file.write(json.dumps({"text": " ".join(words[sentence]), "label": label}) + "\n")


def train(tmp_path: Path, train_file: Path, validation_file: Path, name: str, *extra: str) -> tuple:
    config = tmp_path / "scale.jsonnet"
    config.write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IPUFLOW_DATA_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-c", PEAK_OF_CHILD, sys.executable, "-m", "ipuflow", "train", str(config),
               "-s", str(tmp_path / name), "--ext-var", f"train={train_file}", "--ext-var",
               f"validation={validation_file}", *extra]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    peak = float(next(line.split()[1] for line in completed.stdout.splitlines() if line.startswith("PEAK_MB")))
    return peak, completed.stdout + completed.stderr


@pytest.mark.slow
def test_training_on_a_million_lines_stays_within_bounded_memory(tmp_path):
    validation = tmp_path / "validation.jsonl"
    write_sentences(validation, 5_000, seed=1)
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_sentences(small, 100_000, seed=2)
    write_sentences(large, 1_000_000, seed=3)

    small_peak, _ = train(tmp_path, small, validation, "small")
    large_peak, output = train(tmp_path, large, validation, "large")
    print(f"peak RSS: {small_peak:.0f} MB training on 100k lines, {large_peak:.0f} MB on 1M lines")
    metrics = json.loads((tmp_path / "large" / "metrics.json").read_text())
    assert metrics["validation_accuracy"] > 0.8, metrics

    # The per-instance path needed about 3.7 KB per short sentence: 3.7 GB for these lines. Now
    # memory grows only by the token storage (1M lines × ~7.5 tokens × 4 bytes ≈ 30 MB, plus 16
    # bytes of offsets and label per line) over a tenth of the data.
    assert large_peak < 1000, f"peak RSS {large_peak:.0f} MB on 1M lines"
    assert large_peak - small_peak < 200, f"peak RSS {small_peak:.0f} MB on 100k lines, {large_peak:.0f} MB on 1M"

    # A second run with the same config maps the cached data instead of reading the file.
    _, again = train(tmp_path, large, validation, "again", "--dry-run")
    assert "from the data cache" in again and "and cached it in" not in again
    entries = sorted(path for path in (tmp_path / "cache").iterdir() if path.is_dir())
    _, afresh = train(tmp_path, large, validation, "afresh", "--dry-run", "--no-cache")
    assert "from the data cache" not in afresh and "Read 1000000 train instances" in afresh
    assert sorted(path for path in (tmp_path / "cache").iterdir() if path.is_dir()) == entries
