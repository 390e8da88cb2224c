"""Text pairs end to end: a reader's second text → `tokens_pair` → the loader → a pair classifier."""

import json
import random

import pytest

from ipuflow.commands.cli import run

WORDS = ["red", "blue", "green", "cat", "dog", "bird", "runs", "sits", "sleeps", "big", "small", "old"]


def pair_examples(count, seed):
    """The label says whether the hypothesis repeats the premise's words (in another order)."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        premise = rng.sample(WORDS, 4)
        hypothesis = rng.sample(premise, 4) if index % 2 == 0 else rng.sample([w for w in WORDS if w not in premise], 4)
        rows.append({"premise": " ".join(premise), "hypothesis": " ".join(hypothesis),
                     "label": "same" if index % 2 == 0 else "other"})
    return rows


@pytest.mark.slow
def test_a_pair_classifier_trains_on_two_token_fields(tmp_path):
    for name, count, seed in (("train", 200, 0), ("validation", 40, 1)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in pair_examples(count, seed)))
    config = {
        "dataset_reader": {"type": "text_classification_json", "text_key": "premise", "text_pair_key": "hypothesis"},
        "train_data_path": str(tmp_path / "train.jsonl"),
        "validation_data_path": str(tmp_path / "validation.jsonl"),
        "model": {"type": "basic_classifier", "embedding_dim": 16, "text_pair": True,
                  "encoder": {"type": "bag_of_embeddings", "averaged": True}},
        "data_loader": {"batch_size": 8, "shuffle": True, "length_buckets": [4, 8]},
        "trainer": {"num_epochs": 8, "optimizer": {"type": "adam", "lr": 0.05}, "validation_metric": "+accuracy"},
    }
    (tmp_path / "pairs.json").write_text(json.dumps(config))
    assert run(["train", str(tmp_path / "pairs.json"), "-s", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["best_validation_accuracy"] >= 0.9, metrics
