"""A top-level `postprocessor` scores examples at every validation, on the test set, in evaluate and
predict: its metrics drive `validation_metric`, best weights and the metrics files."""

import json
import random

import pytest

from ipuflow.commands.cli import run

from tests.experiment.conftest import FILLER, NEGATIVE, POSITIVE, write_jsonl


def windowed_documents(count, windows, seed):
    """Documents split into `windows` windows; only one window of each carries the sentiment word,
    so the document's vote differs from the windows' mean loss."""
    rng = random.Random(seed)
    rows = []
    for document in range(count):
        label = "pos" if document % 2 == 0 else "neg"
        telling = rng.randrange(windows)
        for window in range(windows):
            words = rng.sample(FILLER, 3)
            if window == telling:
                words.append(rng.choice(POSITIVE if label == "pos" else NEGATIVE))
            rows.append({"doc": f"d{document}", "text": " ".join(words), "label": label})
    return rows


def windowed_config(data, batch_size=4, **trainer):
    """A grouped_vote config over train/validation/test.jsonl of windowed documents in `data`."""
    return {
        "dataset_reader": {"type": "text_classification_json", "id_key": "doc"},
        "train_data_path": str(data / "train.jsonl"),
        "validation_data_path": str(data / "validation.jsonl"),
        "test_data_path": str(data / "test.jsonl"),
        "evaluate_on_test": True,
        "postprocessor": {"type": "grouped_vote"},
        "model": {"type": "basic_classifier", "embedding_dim": 8, "encoder": {"type": "bag_of_embeddings"}},
        "data_loader": {"batch_size": batch_size, "shuffle": True, "max_length": 8},
        "validation_data_loader": {"batch_size": batch_size, "max_length": 8},
        "trainer": {"num_epochs": 6, "optimizer": {"type": "adam", "lr": 0.05},
                    "validation_metric": "+grouped_accuracy", "patience": None, **trainer},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }


@pytest.fixture(scope="module")
def windowed_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("windowed")
    write_jsonl(data / "train.jsonl", windowed_documents(40, 2, seed=0))
    write_jsonl(data / "validation.jsonl", windowed_documents(15, 3, seed=1))
    write_jsonl(data / "test.jsonl", windowed_documents(9, 3, seed=2))
    config = windowed_config(data)
    path = data / "config.json"
    path.write_text(json.dumps(config))
    directory = tmp_path_factory.mktemp("runs") / "windowed"
    assert run(["train", str(path), "-s", str(directory)]) == 0
    return directory, data


def epoch_metrics(directory):
    return [json.loads((directory / f"metrics_epoch_{epoch}.json").read_text()) for epoch in range(6)]


def test_every_validation_is_post_processed_and_the_best_epoch_follows_its_metric(windowed_run):
    directory, _ = windowed_run
    epochs = epoch_metrics(directory)
    scores = [metrics["validation_grouped_accuracy"] for metrics in epochs]
    assert all(0.0 <= score <= 1.0 for score in scores)
    final = json.loads((directory / "metrics.json").read_text())
    best = final["best_epoch"]
    # AllenNLP's tracker: the first epoch that reaches the highest score is the best.
    assert best == scores.index(max(scores))
    losses = [metrics["validation_loss"] for metrics in epochs]
    assert losses.index(min(losses)) != best  # in this run the raw loss would have picked another epoch
    assert final["best_validation_grouped_accuracy"] == pytest.approx(max(scores))
    assert "test_grouped_accuracy" in final
    state = json.loads((directory / "trainer_state.json").read_text())
    assert state["best_metric"] == pytest.approx(max(scores))


def test_evaluate_and_the_run_agree_on_the_post_processed_test_metric(windowed_run, capsys):
    directory, data = windowed_run
    final = json.loads((directory / "metrics.json").read_text())
    capsys.readouterr()
    assert run(["evaluate", str(directory), str(data / "test.jsonl")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["grouped_accuracy"] == pytest.approx(final["test_grouped_accuracy"])


def test_dry_run_accepts_a_postprocessor_metric_and_names_it_among_the_reported(tmp_path, capsys):
    write_jsonl(tmp_path / "train.jsonl", windowed_documents(8, 2, seed=0))
    write_jsonl(tmp_path / "validation.jsonl", windowed_documents(4, 2, seed=1))
    config = {
        "dataset_reader": {"type": "text_classification_json", "id_key": "doc"},
        "train_data_path": str(tmp_path / "train.jsonl"), "validation_data_path": str(tmp_path / "validation.jsonl"),
        "postprocessor": {"type": "grouped_vote"},
        "model": {"type": "basic_classifier", "embedding_dim": 4},
        "data_loader": {"batch_size": 2, "max_length": 8},
        "trainer": {"num_epochs": 1, "validation_metric": "+grouped_accuracy"},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "run"), "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "grouped_accuracy" in json.dumps(plan)
    config["trainer"]["validation_metric"] = "+grouped_acc"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "run2"), "--dry-run"]) == 2
    assert "Did you mean 'grouped_accuracy'?" in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_run_resumed_with_r_keeps_the_post_processed_best_and_ends_as_the_uninterrupted_one(windowed_run, tmp_path):
    import signal

    from tests.experiment.fault_injection import run_with_fault

    reference, _ = windowed_run
    config = reference / "config.json"
    directory = tmp_path / "run"
    # Killed after epoch 3's checkpoint: the best epoch so far (by grouped accuracy) must survive the resume.
    kill_after_epoch_3 = """
        import ipuflow.training.checkpoints.checkpointer as checkpointer
        save = checkpointer.Checkpointer.save_checkpoint
        def saved(self, *args, **kwargs):
            result = save(self, *args, **kwargs)
            if any(path.name.startswith("checkpoint_e4_b0") for path in self.serialization_dir.iterdir()):
                kill_now()
            return result
        checkpointer.Checkpointer.save_checkpoint = saved
    """
    result = run_with_fault(["train", str(config), "-s", str(directory)], kill_after_epoch_3)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    assert run(["train", str(config), "-s", str(directory), "-r"]) == 0
    finished, uninterrupted = (json.loads((path / "metrics.json").read_text()) for path in (directory, reference))
    for key in ("best_epoch", "best_validation_grouped_accuracy", "validation_grouped_accuracy", "test_grouped_accuracy"):
        assert finished[key] == uninterrupted[key], key
