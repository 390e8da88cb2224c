"""`ipuflow train --dry-run`: a pipeable JSON plan, and the mistakes it must catch before a real run."""

import json
import sys
import textwrap

import pytest

from ipuflow.commands.cli import run
from ipuflow.torch_features import FUSED_OPTIMIZERS_ON_CPU, torch_at_least

from tests.experiment.conftest import tiny_config

# Models with the mistakes a dry run must catch; registered once per session from an included package.
BROKEN_MODELS = '''
import torch
from ipuflow.models.model import IGNORE_LABEL, Model


class _Base(Model):
    def __init__(self, vocab) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab.get_vocab_size("tokens"), 4)
        self.out = torch.nn.Linear(4, vocab.get_vocab_size("labels"))

    def logits(self, tokens):
        return self.out(self.embed(tokens).mean(1))


@Model.register("dry_run_wrong_argument_names")
class WrongArgumentNames(_Base):
    def forward(self, text, text_mask, label=None):
        return {"loss": self.logits(text).sum()}


@Model.register("dry_run_no_loss")
class NoLoss(_Base):
    def forward(self, tokens, tokens_mask, label=None):
        return {"logits": self.logits(tokens)}
'''


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugins")
    (root / "dry_run_models").mkdir()
    (root / "dry_run_models" / "__init__.py").write_text(textwrap.dedent(BROKEN_MODELS))
    return root


def write_config(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def dry_run(config_file, directory, *flags):
    return run(["train", str(config_file), "-s", str(directory), "--dry-run", *flags])


def test_stdout_is_only_the_json_plan_with_updates_schedule_optimizer_callbacks_and_dropped_samples(tiny_data, tmp_path, capsys):
    config = tiny_config(tiny_data, num_epochs=3, learning_rate_scheduler={"type": "linear_with_warmup", "warmup_steps": 4})
    config["data_loader"]["batch_size"] = 5  # 48 instances: 9 batches of 5, 3 dropped by drop_last
    path = write_config(tmp_path, config)
    assert dry_run(path, tmp_path / "run") == 0
    done = capsys.readouterr()
    report = json.loads(done.out)  # nothing but the JSON on stdout
    assert "Dry run" in done.err
    assert report["host_calls_per_epoch"] == 9 and report["optimizer_updates_per_epoch"] == 9
    assert report["total_optimizer_updates"] == 27 and report["num_epochs"] == 3
    assert report["training_samples_dropped_per_epoch"] == 3
    assert report["optimizer"]["type"] == "adam" and report["optimizer"]["lr"] == 0.1
    schedule = report["learning_rate_schedule"]
    assert schedule["type"] == "linear_with_warmup"
    assert schedule["lr_at_update"]["1"] == pytest.approx(0.1 / 4) and schedule["lr_at_update"]["27"] == 0.0
    assert "progress" in report["callbacks"] and report["validation_metric"] == "+accuracy"
    assert report["trial_step"]["training_loss"] > 0
    assert "accuracy" in report["trial_step"]["validation_metrics"]
    assert report["padding"]["padding"] == "longest" and report["padding"]["pad_to_multiple_of"] == 1
    assert report["padding"]["because"] == "the executor runs any sequence length"
    assert not (tmp_path / "run").exists()


def test_a_serialization_directory_that_is_a_file_is_refused_by_the_dry_run_and_the_run(tiny_config_file, tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("not a directory")
    assert dry_run(tiny_config_file, a_file) == 2
    assert "is a file, not a directory" in " ".join(capsys.readouterr().err.split())
    assert dry_run(tiny_config_file, a_file / "below") == 2
    assert "cannot be created" in capsys.readouterr().err
    assert run(["train", str(tiny_config_file), "-s", str(a_file)]) == 2
    assert "is a file, not a directory" in " ".join(capsys.readouterr().err.split())
    assert a_file.read_text() == "not a directory"


@pytest.mark.parametrize(
    "model, expected",
    [
        ("dry_run_wrong_argument_names", "forward cannot take the training batch, whose fields are label, tokens, tokens_mask"),
        ("dry_run_no_loss", "forward must return a dict with a scalar 'loss'"),
    ],
)
def test_a_forward_that_cannot_train_fails_the_dry_run(tiny_data, tmp_path, broken_models, monkeypatch, capsys, model, expected):
    config = tiny_config(tiny_data)
    config["model"] = {"type": model}
    path = write_config(tmp_path, config)
    monkeypatch.chdir(broken_models)
    assert dry_run(path, tmp_path / "run", "--include-package", "dry_run_models") == 2
    assert expected in " ".join(capsys.readouterr().err.split())


def test_a_validation_metric_the_model_does_not_report_fails_the_dry_run(tiny_data, tmp_path, capsys):
    path = write_config(tmp_path, tiny_config(tiny_data, validation_metric="+acc"))
    assert dry_run(path, tmp_path / "run") == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "trainer.validation_metric: +acc names 'acc', which the model does not report" in error
    assert "Did you mean 'accuracy'?" in error


def test_a_poptorch_config_is_checked_without_poptorch(tiny_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "poptorch", None)  # importing it fails, as without the Poplar SDK
    executor = {"type": "poptorch", "device_iterations": 2, "gradient_accumulation": 2, "matmul_proportion": 0.3}
    path = write_config(tmp_path, tiny_config(tiny_data, executor=executor))
    assert dry_run(path, tmp_path / "run") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["executor"]["backend"] == "poptorch" and report["executor"]["compiled"] is False
    assert "Poplar SDK" in report["executor"]["note"]
    assert report["combined_batch_size"] == 16 and report["host_calls_per_epoch"] == 3
    assert report["total_optimizer_updates"] == 6 * 3 * 2
    assert report["padding"]["padding"] == "fixed"  # as on the IPU, not as the native stand-in would pad
    assert report["padding"]["because"] == "the poptorch executor runs programs compiled for fixed input shapes"
    longest = tiny_config(tiny_data, executor=executor)
    longest["data_loader"]["padding"] = "longest"
    assert dry_run(write_config(tmp_path, longest, "longest.json"), tmp_path / "run") == 2
    assert 'padding: "longest" gives every batch its own length, but the poptorch executor' in capsys.readouterr().err
    # Its keys and options are still checked.
    bad_key = write_config(tmp_path, tiny_config(tiny_data, executor={**executor, "matmul_proprtion": 0.3}), "bad.json")
    assert dry_run(bad_key, tmp_path / "run") == 2
    assert "trainer.executor.matmul_proprtion: unknown key" in capsys.readouterr().err
    bad_option = write_config(tmp_path, tiny_config(tiny_data, executor={**executor, "precision": "bf16"}), "bf16.json")
    assert dry_run(bad_option, tmp_path / "run") == 2
    assert "IPUs have no bf16" in capsys.readouterr().err


def test_a_poptorch_plan_without_poptorch_reads_the_ipu_config_file(tiny_data, tmp_path, monkeypatch, capsys):
    """Issue 23.5: configs/ipu_config.json's device_iterations 4 and gradient_accumulation_steps 2 shape
    the plan, as they shape the real poptorch run (keys of the executor block still win)."""
    from tests.conftest import ROOT

    monkeypatch.setitem(sys.modules, "poptorch", None)
    executor = {"type": "poptorch", "ipu_config": str(ROOT / "configs" / "ipu_config.json"), "precision": "fp32"}
    path = write_config(tmp_path, tiny_config(tiny_data, executor=executor))
    assert dry_run(path, tmp_path / "run") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["executor"]["device_iterations"] == 4 and report["executor"]["gradient_accumulation"] == 2
    assert report["combined_batch_size"] == 4 * 4 * 2 and report["optimizer_updates_per_epoch"] == 4
    # A key of the block wins over the file; the trainer's own spelling does too.
    block = write_config(tmp_path, tiny_config(tiny_data, executor={**executor, "device_iterations": 1}), "block.json")
    assert dry_run(block, tmp_path / "run") == 0
    assert json.loads(capsys.readouterr().out)["executor"]["device_iterations"] == 1
    alias = write_config(tmp_path, tiny_config(tiny_data, executor=executor, num_gradient_accumulation_steps=3), "alias.json")
    assert dry_run(alias, tmp_path / "run") == 0
    assert json.loads(capsys.readouterr().out)["executor"]["gradient_accumulation"] == 3


def test_the_quickstart_ipu_plan_shows_the_ipu_settings_its_file_sets(tiny_data, monkeypatch, tmp_path, capsys):
    """Issue 36.6: the plan of configs/quickstart_ipu.jsonnet shows what configs/ipu_config.json sets, so a
    user can confirm the file was read (its relative path is read from the working directory)."""
    from tests.conftest import ROOT

    monkeypatch.setitem(sys.modules, "poptorch", None)
    monkeypatch.chdir(ROOT)
    data = {f"{split}_data_path": str(tiny_data / f"{split}.jsonl") for split in ("train", "validation", "test")}
    assert run(["train", "configs/quickstart_ipu.jsonnet", "-s", str(tmp_path / "run"), "--dry-run",
                "-o", json.dumps({**data, "data_loader.batch_size": 4})]) == 0
    ipu = json.loads(capsys.readouterr().out)["executor"]["ipu"]
    assert ipu["enable_half_partials"] is True and ipu["executable_cache_dir"] == "./exe_cache"
    for mode in ("training", "inference"):
        assert ipu[mode]["ipus_per_replica"] == 1 and ipu[mode]["available_memory_proportion"] == {"IPU0": 0.3}
        assert ipu[mode]["placement"] == ["the whole model: IPU 0"]


TINY_BERT = {"model_type": "bert", "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 2,
             "intermediate_size": 32, "max_position_embeddings": 16}


def test_a_hugging_face_models_placement_is_in_the_plan_and_checked_without_poptorch(tiny_data, tmp_path, monkeypatch,
                                                                                         capsys):
    monkeypatch.setitem(sys.modules, "poptorch", None)
    ipu_config = write_config(tmp_path, {"layers_per_ipu": [1, -1], "gradient_accumulation_steps": 3,
                                         "inference_layers_per_ipu": [2, 1, 1]}, "ipu_config.json")
    config = tiny_config(tiny_data, executor={"type": "poptorch", "ipu_config": str(ipu_config)})
    config["model"] = {"type": "huggingface", "task": "sequence_classification", "config": TINY_BERT}
    assert dry_run(write_config(tmp_path, config), tmp_path / "run") == 0
    ipu = json.loads(capsys.readouterr().out)["executor"]["ipu"]
    assert ipu["training"]["ipus_per_replica"] == 2 and ipu["training"]["placement"] == [
        "transformer.bert.embeddings: IPU 0", "transformer.bert.encoder.layer.0: IPU 0",
        "transformer.bert.encoder.layer.1-3: IPU 1", "transformer.classifier: IPU 1"]
    assert ipu["inference"]["ipus_per_replica"] == 3 and ipu["inference"]["placement"][-1] == "transformer.classifier: IPU 2"
    # What the executor refuses, the dry run refuses without the Poplar SDK: 5 layers for a model of 4.
    write_config(tmp_path, {"layers_per_ipu": [2, 3], "gradient_accumulation_steps": 3}, "ipu_config.json")
    assert dry_run(write_config(tmp_path, config), tmp_path / "run") == 2
    error = " ".join(capsys.readouterr().err.split())  # the paragraph is wrapped to the terminal
    assert "trainer.executor.layers_per_ipu: [2, 3] does not define the correct number of layers for the model (4)" in error
    assert "(The value comes from 'layers_per_ipu' in trainer.executor.ipu_config" in error


def test_the_dry_run_plan_shows_the_implementation_and_refuses_both_keys_true(tiny_data, tmp_path, capsys):
    # Issue 32: the optimizer's implementation of the update (fused, foreach, single-tensor) is in the plan.
    path = write_config(tmp_path, tiny_config(tiny_data))
    assert dry_run(path, tmp_path / "run") == 0
    fused_on_cpu = torch_at_least(FUSED_OPTIMIZERS_ON_CPU)
    assert json.loads(capsys.readouterr().out)["optimizer"]["implementation"] == ("fused" if fused_on_cpu else "foreach")
    overrides = json.dumps({"trainer.optimizer.fused": True, "trainer.optimizer.foreach": True})
    assert dry_run(path, tmp_path / "run", "-o", overrides) == 2
    assert "trainer.optimizer.fused: fused and foreach cannot both be true" in capsys.readouterr().err
