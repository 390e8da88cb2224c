"""`ipuflow train` end to end: the serialization directory, dry runs, recover/force rules, archives."""

import json
import tarfile
import textwrap

import pytest
import torch

from ipuflow.experiment.archive.archival import load_archive
from ipuflow.commands.cli import run
from ipuflow.config import Params

from tests.experiment.conftest import tiny_config


def test_the_serialization_directory_holds_everything_a_run_leaves(trained_run, tiny_config_file):
    names = {path.name for path in trained_run.iterdir()}
    assert {"config.json", "meta.json", "out.log", "vocabulary", "best.safetensors", "metrics.json",
            "model.tar.gz", "log"} <= names
    assert {f"metrics_epoch_{epoch}.json" for epoch in range(6)} <= names
    assert json.loads((trained_run / "config.json").read_text()) == json.loads(tiny_config_file.read_text())
    meta = json.loads((trained_run / "meta.json").read_text())
    assert {"ipuflow_version", "torch_version", "python_version"} <= set(meta)
    log = (trained_run / "out.log").read_text()
    assert "trainer.num_epochs = 6" in log and "data_loader.batch_size = 4" in log
    metrics = json.loads((trained_run / "metrics.json").read_text())
    assert {"best_epoch", "best_validation_accuracy", "training_loss", "validation_loss", "test_accuracy"} <= set(metrics)
    assert (trained_run / "vocabulary" / "labels.txt").read_text().split() == ["pos", "neg"] or \
        sorted((trained_run / "vocabulary" / "labels.txt").read_text().split()) == ["neg", "pos"]
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        members = set(archive.getnames())
    assert {"config.json", "weights.safetensors", "meta.json", "vocabulary"} <= members
    assert list((trained_run / "log").glob("train/events.out.tfevents.*"))


def test_the_tiny_task_is_learnt(trained_run):
    metrics = json.loads((trained_run / "metrics.json").read_text())
    assert metrics["best_validation_accuracy"] >= 0.9


def test_archives_rebuild_the_model_with_the_same_predictions(trained_run):
    from_dir = load_archive(trained_run)
    from_tar = load_archive(trained_run / "model.tar.gz")
    instances = from_dir.dataset_reader.read(json.loads((trained_run / "config.json").read_text())["validation_data_path"])
    batch = {
        "tokens": torch.tensor([[from_dir.vocab.get_token_index(t, "tokens") for t in ["the", "good", "film", "was"]]]),
        "tokens_mask": torch.ones(1, 4, dtype=torch.bool),
    }
    with torch.no_grad():
        first = from_dir.model(**batch)["logits"]
        second = from_tar.model(**batch)["logits"]
    assert torch.equal(first, second)
    assert len(instances) == 18


def test_tar_members_outside_the_target_are_refused(tmp_path):
    import io

    from ipuflow.config import ConfigurationError

    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        data = b"{}"
        info = tarfile.TarInfo("../escaped.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(ConfigurationError, match="refusing to extract"):
        load_archive(evil)
    assert not (tmp_path.parent / "escaped.json").exists()


def test_dry_run_builds_everything_and_writes_nothing(tiny_config_file, tmp_path, capsys):
    target = tmp_path / "never"
    assert run(["train", str(tiny_config_file), "-s", str(target), "--dry-run"]) == 0
    assert not target.exists()
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{"):])
    assert report["datasets"] == {"train": 48, "validation": 18, "test": 10}
    assert report["vocabulary"]["labels"] == 2 and report["parameters"] > 0
    assert report["host_calls_per_epoch"] == 12
    assert report["executor"]["backend"] == "native" and report["executor"]["device"] == "cpu"
    assert report["executor"]["device_iterations"] == 1 and report["executor"]["precision"] == "fp32"


def test_directory_rules(tiny_config_file, tiny_data, tmp_path, capsys):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("precious")
    assert run(["train", str(tiny_config_file), "-s", str(busy)]) == 2
    assert "not empty" in capsys.readouterr().err and (busy / "keep.txt").exists()
    assert run(["train", str(tiny_config_file), "-s", str(busy), "--force", "--recover"]) == 2
    assert "cannot be used together" in capsys.readouterr().err
    assert run(["train", str(tiny_config_file), "-s", str(tmp_path / "missing"), "--recover"]) == 2
    assert "no run to recover" in capsys.readouterr().err


def test_recover_with_a_changed_config_lists_the_differences(trained_run, tiny_config_file, capsys):
    code = run(["train", str(tiny_config_file), "-s", str(trained_run), "--recover",
                "-o", '{"trainer.num_epochs": 5, "data_loader.batch_size": 2}'])
    assert code == 2
    error = capsys.readouterr().err
    assert "trainer.num_epochs: 6 → 5" in " ".join(error.split()) and "data_loader.batch_size" in error


def test_recover_of_a_finished_run_keeps_its_results(trained_run, tiny_config_file):
    before = json.loads((trained_run / "metrics.json").read_text())
    assert run(["train", str(tiny_config_file), "-s", str(trained_run), "--recover"]) == 0
    after = json.loads((trained_run / "metrics.json").read_text())
    assert after["best_validation_accuracy"] == before["best_validation_accuracy"]
    assert after["training_loss"] == before["training_loss"]


def test_unknown_top_level_key_and_bad_value_are_clear_errors(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data)
    config["trainr"] = {}
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "r1")]) == 2
    assert "trainr: unknown key for TrainModel; did you mean 'trainer'?" in " ".join(capsys.readouterr().err.split())
    assert run(["train", str(tiny_data / "config.json"), "-s", str(tmp_path / "r2"),
                "-o", '{"trainer.optimizer.lr": "fast"}']) == 2
    assert "trainer.optimizer.lr: expected a number" in " ".join(capsys.readouterr().err.split())


def test_a_custom_model_registered_in_an_included_package_trains(tiny_data, tmp_path, monkeypatch):
    package = tmp_path / "my_models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mean_model.py").write_text(textwrap.dedent('''
        import torch
        from ipuflow.models.model import IGNORE_LABEL, Model

        @Model.register("mean_of_embeddings_for_test")
        class MeanModel(Model):
            default_predictor = "text_classifier"

            def __init__(self, vocab, dim: int = 4) -> None:
                super().__init__()
                self.vocab = vocab
                self.embed = torch.nn.Embedding(vocab.get_vocab_size("tokens"), dim)
                self.out = torch.nn.Linear(dim, vocab.get_vocab_size("labels"))
                self.correct = 0
                self.total = 0

            def forward(self, tokens, tokens_mask, label=None, **unused):
                mask = tokens_mask.unsqueeze(-1).float()
                pooled = (self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1)
                logits = self.out(pooled)
                outputs = {"logits": logits, "probs": logits.softmax(-1)}
                if label is not None:
                    outputs["loss"] = torch.nn.functional.cross_entropy(logits, label, ignore_index=IGNORE_LABEL)
                return outputs

            def update_metrics(self, outputs, batch):
                real = batch["label"] != IGNORE_LABEL
                predicted = outputs["logits"].argmax(-1).cpu()
                self.correct += int((predicted[real] == batch["label"][real]).sum())
                self.total += int(real.sum())

            def get_metrics(self, reset=False):
                value = {"accuracy": self.correct / max(self.total, 1)}
                if reset:
                    self.correct = self.total = 0
                return value
    '''))
    config = tiny_config(tiny_data)
    config["model"] = {"type": "mean_of_embeddings_for_test", "dim": 6}
    config["trainer"]["num_epochs"] = 1
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    assert run(["train", str(path), "-s", str(tmp_path / "custom_run"), "--include-package", "my_models"]) == 0
    assert (tmp_path / "custom_run" / "model.tar.gz").is_file()
    resolved = Params(json.loads((tmp_path / "custom_run" / "config.json").read_text()))
    assert resolved["model"]["type"] == "mean_of_embeddings_for_test"


def test_length_buckets_train_validate_and_evaluate(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data)
    config["data_loader"] = {"batch_size": 4, "shuffle": True, "length_buckets": [2, 4, 8]}
    config["trainer"]["num_epochs"] = 2
    path = tmp_path / "buckets.json"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "bucketed")]) == 0
    metrics = json.loads((tmp_path / "bucketed" / "metrics.json").read_text())
    assert "validation_accuracy" in metrics and "test_accuracy" in metrics
    capsys.readouterr()
    assert run(["evaluate", str(tmp_path / "bucketed"), str(tiny_data / "test.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_recover_keeps_the_runs_vocabulary_when_the_data_changed(tiny_data, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    config = tiny_config(data)
    config["trainer"]["num_epochs"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    assert run(["train", str(path), "-s", str(run_dir)]) == 0
    tokens_before = (run_dir / "vocabulary" / "tokens.txt").read_text()
    with open(data / "train.jsonl", "a") as handle:
        handle.write(json.dumps({"text": "brand new words nobody saw", "label": "pos"}) + "\n")
    assert run(["train", str(path), "-s", str(run_dir), "--recover"]) == 0
    assert (run_dir / "vocabulary" / "tokens.txt").read_text() == tokens_before
    archive = load_archive(run_dir / "model.tar.gz")
    assert archive.vocab.get_token_index("brand", "tokens") == archive.vocab.get_token_index("@@UNKNOWN@@", "tokens")
    assert archive.model.embedding.num_embeddings == archive.vocab.get_vocab_size("tokens")
