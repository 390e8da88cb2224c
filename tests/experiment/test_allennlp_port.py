"""Porting an AllenNLP 2.10 config (issue 26.9): docs/migrating-from-allennlp.md's worked port is
checked here, its AllenNLP config failing with every place to change in one error and its ipuflow
config training; AllenNLP names with the same meaning are accepted."""

import json
import re
from pathlib import Path

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError, Params

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-allennlp.md"


def guide_configs(data_dir):
    """The AllenNLP config and its port from the guide, reading `data_dir`'s tiny task."""
    blocks = re.findall(r"```jsonnet\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 2  # the first port; the SST port is test_allennlp_sst_port's
    return [block.replace("data/rotten_tomatoes/", f"{data_dir}/") for block in blocks[:2]]


def test_the_allennlp_config_fails_once_with_every_place_to_change(tiny_data, tmp_path, capsys):
    allennlp, _ = guide_configs(tiny_data)
    config = tmp_path / "allennlp.jsonnet"
    config.write_text(allennlp)
    assert run(["train", str(config), "-s", str(tmp_path / "run"), "--dry-run"]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "7 mistakes" in message  # a renamed section's type and keys are checked in the same run
    for path in ("dataset_reader.token_indexers", "dataset_reader.max_sequence_length", "model.text_field_embedder",
                 "model.seq2vec_encoder", "model.seq2vec_encoder.embedding_dim", "data_loader.batch_sampler"):
        assert f"{path}: unknown key" in message
    assert "did you mean 'tokenizer'" not in message  # token_indexers gets a pointed message instead
    assert "token_indexers have no counterpart" in message and "name for AllenNLP's max_sequence_length is `max_tokens`" in message
    assert "name for AllenNLP's seq2vec_encoder is `encoder`" in message
    assert "model.seq2vec_encoder.type: 'boe' is not a registered name" in message
    assert not (tmp_path / "run").exists()


def test_the_port_trains(tiny_data, tmp_path, capsys):
    _, port = guide_configs(tiny_data)
    config = tmp_path / "port.jsonnet"
    config.write_text(port)
    assert run(["train", str(config), "-s", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert "best_validation_accuracy" in metrics and (tmp_path / "run" / "model.tar.gz").is_file()
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["trainer"]["optimizer"]["type"] == "huggingface_adamw"


def test_an_allennlp_type_name_with_another_meaning_says_what_to_write(tiny_data, tmp_path, capsys):
    from tests.experiment.conftest import tiny_config

    config = tiny_config(tiny_data, num_epochs=1, callbacks=["console_logger"])
    config["model"]["encoder"] = {"type": "boe"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "run")]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "model.encoder.type: 'boe' is not a registered name for Seq2VecEncoder: AllenNLP's bag of embeddings" in message
    assert "\"averaged\": false" in message
    assert "trainer.callbacks.0.type: 'console_logger'" in message and "console_metrics" in message


def build_optimizer(config):
    from ipuflow.training.optim.optimizers import Optimizer

    model = torch.nn.Linear(2, 1)
    return Optimizer.from_params(Params(config), model_parameters=list(model.named_parameters()))


def test_huggingface_adamw_is_torch_adamw_with_allennlps_defaults():
    optimizer = build_optimizer({"type": "huggingface_adamw"})
    assert isinstance(optimizer, torch.optim.AdamW)
    group = optimizer.param_groups[0]
    assert group["lr"] == 1e-5 and group["weight_decay"] == 0.0 and group["betas"] == (0.9, 0.999)
    assert group["eps"] == 1e-8
    build_optimizer({"type": "huggingface_adamw", "correct_bias": True, "lr": 0.1})
    with pytest.raises(ConfigurationError, match=r"^correct_bias: false .* torch's AdamW always corrects the bias"):
        build_optimizer({"type": "huggingface_adamw", "correct_bias": False})


def test_track_epoch_callback_is_accepted_under_allennlps_name():
    from ipuflow.training.callbacks import TrainerCallback
    from ipuflow.training.callbacks.track_epoch import TrackEpochCallback

    assert TrainerCallback.resolve_class_name("track_epoch_callback")[0] is TrackEpochCallback
