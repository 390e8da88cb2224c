"""Issue 35: `validation_data_path` as a mapping from names to paths. Every set is scored at every
validation, its metrics keyed by name, and `validation_metric` names the one that picks the best epoch."""

import json

import pytest

from ipuflow.commands.cli import run

from tests.experiment.conftest import make_examples, tiny_config, write_jsonl


def flipped(rows):
    return [{**row, "label": "neg" if row["label"] == "pos" else "pos"} for row in rows]


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory, tiny_data):
    data = tmp_path_factory.mktemp("two_sets")
    write_jsonl(data / "flipped.jsonl", flipped(make_examples(18, seed=1)))
    return {"clean": str(tiny_data / "validation.jsonl"), "flipped": str(data / "flipped.jsonl")}


def train(tmp_path, tiny_data, two_sets, **trainer):
    config = tiny_config(tiny_data, num_epochs=4, **trainer)
    config["validation_data_path"] = two_sets
    config["evaluate_on_test"] = False
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    assert run(["train", str(config_file), "-s", str(run_dir)]) == 0
    epochs = [json.loads((run_dir / f"metrics_epoch_{epoch}.json").read_text()) for epoch in range(4)
              if (run_dir / f"metrics_epoch_{epoch}.json").exists()]
    return run_dir, epochs, json.loads((run_dir / "metrics.json").read_text())


def first_best(values):
    """The validation AllenNLP's tracker keeps: the first strict maximum."""
    return max(range(len(values)), key=lambda index: (values[index], -index))


def test_the_best_epoch_is_picked_by_the_named_set(tmp_path, tiny_data, two_sets):
    run_dir, epochs, final = train(tmp_path, tiny_data, two_sets, validation_metric="+flipped_accuracy")
    for metrics in epochs:
        assert {"validation_clean_accuracy", "validation_clean_loss", "validation_flipped_accuracy",
                "validation_flipped_loss"} <= set(metrics)
        assert "validation_accuracy" not in metrics and "validation_loss" not in metrics
        # The flipped set's labels are the clean set's reversed, so its accuracy is the complement.
        assert metrics["validation_flipped_accuracy"] == pytest.approx(1 - metrics["validation_clean_accuracy"])
    flipped_accuracy = [metrics["validation_flipped_accuracy"] for metrics in epochs]
    clean_accuracy = [metrics["validation_clean_accuracy"] for metrics in epochs]
    assert first_best(flipped_accuracy) != first_best(clean_accuracy)  # the choice of set matters here
    assert final["best_epoch"] == first_best(flipped_accuracy)
    assert final["best_validation_flipped_accuracy"] == max(flipped_accuracy)
    assert final["best_validation_clean_accuracy"] == clean_accuracy[final["best_epoch"]]

    # The archive stores the mapping, and evaluate loads it (and scores any file given).
    output = tmp_path / "evaluation.json"
    assert run(["evaluate", str(run_dir / "model.tar.gz"), two_sets["flipped"], "--output-file", str(output)]) == 0
    assert json.loads(output.read_text())["accuracy"] == pytest.approx(max(flipped_accuracy))


def test_the_other_set_gives_another_best_epoch(tmp_path, tiny_data, two_sets):
    _, epochs, final = train(tmp_path, tiny_data, two_sets, validation_metric="+clean_accuracy")
    assert final["best_epoch"] == first_best([metrics["validation_clean_accuracy"] for metrics in epochs])


def test_early_stopping_follows_the_named_set(tmp_path, tiny_data, two_sets):
    _, epochs, final = train(tmp_path, tiny_data, two_sets, validation_metric="+flipped_accuracy", patience=1)
    # Training makes the flipped set's accuracy fall: patience 1 stops after the first epoch without a gain.
    assert final["best_epoch"] == 0 and len(epochs) == 2


def test_a_metric_of_no_set_is_refused_before_training_naming_the_sets(tmp_path, tiny_data, two_sets, capsys):
    config = tiny_config(tiny_data, num_epochs=1, validation_metric="-loss")
    config["validation_data_path"] = two_sets
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    assert run(["train", str(config_file), "-s", str(tmp_path / "run")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "trainer.validation_metric:" in message and "-clean_loss" in message and "clean, flipped" in message


def test_a_bad_set_name_is_refused(tmp_path, tiny_data, two_sets, capsys):
    config = tiny_config(tiny_data, num_epochs=1)
    config["validation_data_path"] = {"my set": two_sets["clean"]}
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    assert run(["train", str(config_file), "-s", str(tmp_path / "run")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "validation_data_path:" in message and "'my set'" in message


def test_dry_run_reads_and_checks_every_set(tmp_path, tiny_data, two_sets, capsys):
    config = tiny_config(tiny_data, num_epochs=1, validation_metric="+flipped_accuracy")
    config["validation_data_path"] = two_sets
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    assert run(["train", str(config_file), "-s", str(tmp_path / "run"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "validation.clean" in out and "validation.flipped" in out and "flipped_accuracy" in out


def test_an_override_gives_a_single_path_config_several_sets(tmp_path, tiny_data, two_sets, capsys):
    # A data path is a file, not a registered name: an object given with -o replaces it. (It was
    # merged as if the path were a component's type, adding a set named "type".)
    config = tiny_config(tiny_data, num_epochs=1, validation_metric="+flipped_accuracy")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    overrides = json.dumps({"validation_data_path": two_sets})
    assert run(["train", str(config_file), "-s", str(tmp_path / "run"), "--dry-run", "-o", overrides]) == 0
    out = capsys.readouterr().out
    assert "validation.clean" in out and "validation.flipped" in out and "validation.type" not in out


def test_a_missing_file_of_one_set_names_its_key(tmp_path, tiny_data, two_sets, capsys):
    config = tiny_config(tiny_data, num_epochs=1, validation_metric="+clean_accuracy")
    config["validation_data_path"] = {"clean": two_sets["clean"], "other": str(tmp_path / "nope.jsonl")}
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    assert run(["train", str(config_file), "-s", str(tmp_path / "run")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "validation_data_path.other: Data file" in message and "nope.jsonl' does not exist" in message
    assert not (tmp_path / "run").exists()  # a run that failed before its first update leaves nothing
