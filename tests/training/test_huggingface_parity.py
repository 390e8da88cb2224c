"""Hugging Face callback parity (issue 23.7): `pop_callback`/`remove_callback`, `report_to` "all" and
"none", and `WANDB_PROJECT`."""

import json

import pytest

from ipuflow.commands.cli import run
from ipuflow.training import TrainerCallback
from tests.experiment.conftest import tiny_config, write_tiny_data
from tests.training.test_trainer import build


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("tiny_data"))


class Counting(TrainerCallback):
    def __init__(self, serialization_dir):
        super().__init__(serialization_dir)
        self.steps = 0

    def on_step_end(self, event):
        self.steps += 1


class AllenNlpStyle(TrainerCallback):
    def __init__(self, serialization_dir):
        super().__init__(serialization_dir)
        self.batches = 0

    def on_batch(self, trainer, batch_inputs, batch_outputs, batch_metrics, epoch, batch_number, is_training,
                 is_primary=True, batch_grad_norm=None, **kwargs):
        self.batches += 1


def test_pop_and_remove_callback_by_instance_or_class_stop_its_events(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": []}, train=8, validation=4, batch_size=4)
    kept, removed, allennlp = Counting(str(tmp_path)), Counting(str(tmp_path)), AllenNlpStyle(str(tmp_path))
    for callback in (kept, removed, allennlp):
        trainer.add_callback(callback)
    assert trainer.pop_callback(removed) is removed
    trainer.remove_callback(AllenNlpStyle)
    assert trainer.pop_callback(AllenNlpStyle) is None  # none left: nothing happens, as in Hugging Face
    trainer.train()
    assert kept.steps == 2 and removed.steps == 0 and allennlp.batches == 0
    assert removed not in trainer.callbacks and allennlp not in trainer.callbacks


def _dry_run_callbacks(tmp_path, capsys, report_to):
    config = {**tiny_config(tmp_path, num_epochs=1), "report_to": report_to}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert run(["train", str(tmp_path / "config.json"), "-s", str(tmp_path / "run"), "--dry-run"]) == 0
    return json.loads(capsys.readouterr().out)["callbacks"]


def test_report_to_all_and_none(tiny_data, tmp_path, capsys, monkeypatch):
    import shutil

    for name in ("train.jsonl", "validation.jsonl", "test.jsonl"):
        shutil.copy(tiny_data / name, tmp_path / name)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    everything = _dry_run_callbacks(tmp_path, capsys, "all")
    assert {"tensorboard", "mlflow", "wandb"} <= set(everything)
    nothing = _dry_run_callbacks(tmp_path, capsys, "none")
    assert "mlflow" not in nothing and "wandb" not in nothing


def test_wandb_project_comes_from_the_environment_unless_configured(tmp_path, monkeypatch):
    from ipuflow.training.callbacks.tracking.callbacks import WandbCallback

    monkeypatch.setenv("WANDB_PROJECT", "from-env")
    assert WandbCallback(str(tmp_path)).make_run().project == "from-env"
    assert WandbCallback(str(tmp_path), project="configured").make_run().project == "configured"
    monkeypatch.delenv("WANDB_PROJECT")
    assert WandbCallback(str(tmp_path)).make_run().project == "ipuflow"


def test_num_input_tokens_seen_and_total_flos_are_counted_as_hugging_face_counts_them(tiny_data, tmp_path):
    import torch

    from ipuflow.experiment.archive.archival import load_archive

    config = tiny_config(tiny_data, num_epochs=1)
    config["data_loader"]["padding"] = "fixed"  # every batch max_length wide: padding is counted too
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert run(["train", str(tmp_path / "config.json"), "-s", str(tmp_path / "run")]) == 0
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    max_length = config["data_loader"]["max_length"]
    assert state["num_input_tokens_seen"] == state["samples_seen"] * max_length > 0  # padding included, as input_ids.numel()
    model = load_archive(tmp_path / "run" / "model.tar.gz").model
    embeddings = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    outside = sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
    assert state["total_flos"] == 6.0 * state["num_input_tokens_seen"] * outside
