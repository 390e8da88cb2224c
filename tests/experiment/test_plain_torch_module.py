"""A plain `torch.nn.Module` (not an ipuflow `Model`) whose forward returns a dict with `loss`, used
as a model: by a dotted class path or registered under `Model` in an included package, it trains,
evaluates and archives; one that does not return a dict with `loss` is refused, saying what to
subclass."""

import json
import textwrap

import pytest

from ipuflow.commands.cli import run
from ipuflow.experiment.archive.archival import load_archive

from tests.experiment.conftest import tiny_config

PLAIN_MODULE = '''
import torch

from ipuflow.models.model import Model


class PlainMean(torch.nn.Module):
    """Mean of embeddings, then a linear layer: no ipuflow base class at all."""

    def __init__(self, vocab, dim: int = 4) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab.get_vocab_size("tokens"), dim)
        self.out = torch.nn.Linear(dim, vocab.get_vocab_size("labels"))

    def forward(self, tokens, tokens_mask, label=None):
        mask = tokens_mask.unsqueeze(-1).float()
        logits = self.out((self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1))
        outputs = {"logits": logits}
        if label is not None:
            outputs["loss"] = torch.nn.functional.cross_entropy(logits, label, ignore_index=-100)
        return outputs


@Model.register("plain_mean_for_test")
class RegisteredPlainMean(PlainMean):
    """The same, registered by name."""


class ReturnsTensor(torch.nn.Module):
    def __init__(self, vocab) -> None:
        super().__init__()
        self.out = torch.nn.Linear(1, 1)

    def forward(self, tokens, tokens_mask, label=None):
        return self.out(tokens_mask.float().sum(1, keepdim=True)).sum()
'''


@pytest.fixture()
def plain_package(tmp_path, monkeypatch):
    package = tmp_path / "plain_models_for_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "modules.py").write_text(textwrap.dedent(PLAIN_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return "plain_models_for_test"


@pytest.mark.parametrize("model_type", ["plain_models_for_test.modules.PlainMean", "plain_mean_for_test"])
def test_a_plain_torch_module_trains_evaluates_and_archives(tiny_data, tmp_path, plain_package, model_type, capsys):
    config = tiny_config(tiny_data)
    config["model"] = {"type": model_type, "dim": 6}
    config["trainer"]["num_epochs"] = 2
    config["trainer"]["validation_metric"] = "-loss"
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(config))
    run_dir = tmp_path / "plain_run"
    assert run(["train", str(path), "-s", str(run_dir), "--include-package", plain_package]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert {"training_loss", "validation_loss", "test_loss"} <= set(metrics)
    loaded = load_archive(run_dir / "model.tar.gz")
    assert type(loaded.model).__name__ in ("PlainMean", "RegisteredPlainMean")
    capsys.readouterr()
    assert run(["evaluate", str(run_dir / "model.tar.gz"), str(tiny_data / "test.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["loss"] == pytest.approx(metrics["test_loss"], rel=1e-5)


def test_a_plain_module_without_a_loss_dict_is_refused_saying_what_to_return(tiny_data, tmp_path, plain_package, capsys):
    config = tiny_config(tiny_data)
    config["model"] = {"type": "plain_models_for_test.modules.ReturnsTensor"}
    config["trainer"]["num_epochs"] = 1
    path = tmp_path / "tensor.json"
    path.write_text(json.dumps(config))
    assert run(["train", str(path), "-s", str(tmp_path / "tensor_run"), "--include-package", plain_package]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "ReturnsTensor" in message and "dict" in message and "loss" in message
    assert "ipuflow.models.model.Model" in message
    assert "Traceback" not in message
