"""A tiny sentiment task and config shared by the end-to-end tests of train, evaluate and predict."""

import json
import random

import pytest

POSITIVE = ["good", "great", "fine", "lovely", "superb", "witty"]
NEGATIVE = ["bad", "awful", "dull", "boring", "poor", "tedious"]
FILLER = ["the", "film", "was", "a", "plot", "and", "very", "movie"]


def make_examples(count, seed):
    rng = random.Random(seed)
    examples = []
    for index in range(count):
        label = "pos" if index % 2 == 0 else "neg"
        words = rng.sample(FILLER, 3) + [rng.choice(POSITIVE if label == "pos" else NEGATIVE)]
        rng.shuffle(words)
        examples.append({"text": " ".join(words), "label": label})
    return examples


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def tiny_config(data_dir, **trainer):
    return {
        "dataset_reader": {"type": "text_classification_json"},
        "train_data_path": str(data_dir / "train.jsonl"),
        "validation_data_path": str(data_dir / "validation.jsonl"),
        "test_data_path": str(data_dir / "test.jsonl"),
        "evaluate_on_test": True,
        "model": {"type": "basic_classifier", "embedding_dim": 8, "encoder": {"type": "bag_of_embeddings"}},
        "data_loader": {"batch_size": 4, "shuffle": True, "max_length": 8},
        "trainer": {"num_epochs": 6, "optimizer": {"type": "adam", "lr": 0.1}, "validation_metric": "+accuracy",
                    **trainer},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }


def write_tiny_data(data_dir):
    """The task's train/validation/test JSON-lines files in `data_dir`."""
    write_jsonl(data_dir / "train.jsonl", make_examples(48, seed=0))
    write_jsonl(data_dir / "validation.jsonl", make_examples(18, seed=1))
    write_jsonl(data_dir / "test.jsonl", make_examples(10, seed=2))
    return data_dir


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("tiny_data"))


@pytest.fixture(scope="session")
def tiny_config_file(tiny_data):
    path = tiny_data / "config.json"
    path.write_text(json.dumps(tiny_config(tiny_data)))
    return path


@pytest.fixture(scope="session")
def trained_run(tiny_config_file, tmp_path_factory):
    """A finished `ipuflow train` run directory (trained once per session)."""
    from ipuflow.commands.cli import run

    directory = tmp_path_factory.mktemp("runs") / "tiny"
    code = run(["train", str(tiny_config_file), "-s", str(directory)])
    assert code == 0
    return directory
