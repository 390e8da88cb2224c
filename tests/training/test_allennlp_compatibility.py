"""AllenNLP 2.10 users (issue 23.1–23.3): a `TrainerCallback` with AllenNLP's hook signatures runs
unchanged; `get_checkpoint_state()` yields AllenNLP's (model_state, trainer_state) pair; AllenNLP's
trainer keys name their replacements; a model's regularization penalty joins the loss as `reg_loss`."""

from typing import Any, Dict, List, Optional

import pytest
import torch

from ipuflow.training import TrainerCallback
from tests.experiment.conftest import write_tiny_data
from tests.training.regression import LinearRegression as LinearRegressionBase
from tests.training.test_trainer import build


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return write_tiny_data(tmp_path_factory.mktemp("tiny_data"))


class AllenNlpStyleCallback(TrainerCallback):
    """Written as for AllenNLP 2.10 (allennlp/training/callbacks/callback.py): the trainer first, keywords
    as AllenNLP's trainer passes them, `**kwargs` for forward compatibility."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.calls: List[tuple] = []

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        super().on_start(trainer, is_primary=is_primary, **kwargs)
        self.calls.append(("start", is_primary))

    def on_backward(self, trainer, batch_outputs: Dict[str, Any], backward_called: bool, **kwargs) -> bool:
        assert "loss" in batch_outputs
        self.calls.append(("backward", backward_called))
        return False

    def on_batch(self, trainer, batch_inputs: List[Dict[str, Any]], batch_outputs: List[Dict[str, Any]],
                 batch_metrics: Dict[str, Any], epoch: int, batch_number: int, is_training: bool,
                 is_primary: bool = True, batch_grad_norm: Optional[float] = None, **kwargs) -> None:
        assert isinstance(batch_inputs, list) and isinstance(batch_outputs, list) and isinstance(batch_metrics, dict)
        self.calls.append(("batch", epoch, batch_number, is_training))

    def on_epoch(self, trainer, metrics: Dict[str, Any], epoch: int, is_primary: bool = True, **kwargs) -> None:
        assert "training_loss" in metrics
        self.calls.append(("epoch", epoch))

    def on_end(self, trainer, metrics: Dict[str, Any] = None, epoch: int = None, is_primary: bool = True,
               **kwargs) -> None:
        self.calls.append(("end", epoch, metrics is not None))


def test_an_allennlp_2_10_callback_runs_unchanged_in_allennlp_order(tmp_path):
    callback = AllenNlpStyleCallback(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 2, "callbacks": []}, train=16, validation=8, batch_size=4)
    trainer.add_callback(callback)
    trainer.train()
    assert callback.trainer is trainer
    training, validation = len(trainer.data_loader), len(trainer.validation_data_loader)
    expected: List[tuple] = [("start", True)]
    for epoch in range(2):
        for batch in range(1, training + 1):
            expected += [("backward", True), ("batch", epoch, batch, True)]
        expected += [("batch", epoch, batch, False) for batch in range(1, validation + 1)]
        expected.append(("epoch", epoch))
    expected.append(("end", 1, True))
    assert callback.calls == expected


def test_on_end_is_called_after_an_error_with_no_metrics(tmp_path):
    class Failing(AllenNlpStyleCallback):
        def on_epoch(self, trainer, metrics, epoch, is_primary=True, **kwargs):
            raise RuntimeError("boom")

    callback = Failing(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 2, "callbacks": []}, train=8, validation=4, batch_size=4)
    trainer.add_callback(callback)
    with pytest.raises(RuntimeError, match="boom"):
        trainer.train()
    assert callback.calls[-1] == ("end", None, False)  # AllenNLP: both None after an error


def test_an_on_backward_that_runs_backward_again_is_an_error_naming_the_hook(tmp_path):
    class Backward(TrainerCallback):
        def on_backward(self, trainer, batch_outputs, backward_called, **kwargs):
            return True

    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": []}, train=8, validation=4, batch_size=4)
    trainer.add_callback(Backward(str(tmp_path)))
    with pytest.raises(RuntimeError, match=r"Backward.on_backward returned True .*backward_called=True"):
        trainer.train()


def test_an_allennlp_callback_named_in_a_config_runs_through_the_cli(tiny_data, tmp_path):
    import json

    from ipuflow.commands.cli import run
    from tests.experiment.conftest import tiny_config

    seen: List[tuple] = []

    @TrainerCallback.register("test-allennlp-epoch-recorder", exist_ok=True)
    class EpochRecorder(TrainerCallback):
        def on_epoch(self, trainer, metrics, epoch, is_primary=True, **kwargs):
            seen.append((epoch, is_primary, "validation_accuracy" in metrics))

    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(tiny_data, num_epochs=2, callbacks=["test-allennlp-epoch-recorder"])))
    assert run(["train", str(config), "-s", str(tmp_path / "run")]) == 0
    assert seen == [(0, True, True), (1, True, True)]


def test_get_checkpoint_state_keeps_allennlp_pair_shape(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": []}, train=8, validation=4, batch_size=4)
    trainer.train()
    with trainer.get_checkpoint_state() as checkpoint:
        model_state, trainer_state = checkpoint  # AllenNLP callers unpack a pair
        assert len(checkpoint) == 2
        assert set(model_state) == set(trainer.model.state_dict())
        assert trainer_state is checkpoint.trainer_state is checkpoint.training_state
        assert checkpoint.position == (1, 0) and checkpoint.run_status["stopped"] == "num_epochs"


def test_a_pair_checkpoint_from_an_allennlp_style_trainer_saves_at_its_trainer_state_position(tmp_path):
    import contextlib

    from ipuflow.training import Checkpointer, TrainerCheckpoint
    from ipuflow.training.loop.trainer import Trainer

    class PairTrainer(Trainer):
        @contextlib.contextmanager
        def get_checkpoint_state(self):
            yield TrainerCheckpoint({"weight": torch.ones(2)}, {"epochs_completed": 3, "batches_in_epoch_completed": 0})

    checkpointer = Checkpointer(str(tmp_path))
    checkpointer.save_checkpoint(PairTrainer(str(tmp_path)))
    loaded = checkpointer.load_checkpoint()
    model_state, trainer_state = loaded
    assert loaded.position == (3, 0) and torch.equal(model_state["weight"], torch.ones(2))


# -- 23.3: a model's regularization penalty ------------------------------------------------------------


class Penalized(LinearRegressionBase):
    """AllenNLP-style: the penalty comes from `get_regularization_penalty`, not from forward."""

    def get_regularization_penalty(self):
        return 0.1 * self.linear.weight.pow(2).sum()


class PenaltyInForward(LinearRegressionBase):
    """The same objective written by hand in forward (the reference)."""

    def forward(self, features, target, **rest):
        outputs = super().forward(features, target, **rest)
        return {**outputs, "loss": outputs["loss"] + 0.1 * self.linear.weight.pow(2).sum()}


def train_model(model_class, directory, **config):
    from ipuflow.config import Params
    from ipuflow.training import Trainer
    from tests.training.regression import loaders

    torch.manual_seed(0)
    model = model_class()
    train_loader, validation_loader = loaders(train=16, validation=8, batch_size=4)
    trainer = Trainer.from_params(
        Params({"num_epochs": 2, "optimizer": {"type": "sgd", "lr": 0.05}, "enable_default_callbacks": False,
                "log_interval": 1, **config}),
        model=model, serialization_dir=str(directory), data_loader=train_loader, validation_data_loader=validation_loader)
    return trainer, trainer.train()


def test_the_regularization_penalty_is_added_to_the_loss_and_logged_as_reg_loss(tmp_path):
    trainer, metrics = train_model(Penalized, tmp_path / "penalized")
    reference, _ = train_model(PenaltyInForward, tmp_path / "reference")
    assert torch.equal(trainer.model.linear.weight, reference.model.linear.weight)
    logged = [entry for entry in trainer.state.log_history if "batch_loss" in entry][-1]
    assert logged["reg_loss"] > 0 and logged["batch_reg_loss"] == pytest.approx(
        0.1 * float(trainer.model.linear.weight.pow(2).sum()), rel=0.5)
    assert metrics["training_reg_loss"] > 0
    # Validation scores the model's own loss, as AllenNLP does (no penalty outside training).
    assert "validation_reg_loss" not in metrics


# -- 23.3: AllenNLP's trainer keys name their replacements ----------------------------------------------


@pytest.mark.parametrize("edit, path, replacement", [
    ({"trainer": {"cuda_device": -1}}, "trainer.cuda_device", '"trainer.executor.device": "cpu" for -1'),
    ({"trainer": {"opt_level": "O1"}}, "trainer.opt_level", '"trainer.executor.precision": "fp16"'),
    ({"trainer": {"use_amp": True}}, "trainer.use_amp", '"trainer.executor.precision": "fp16"'),
    ({"distributed": {"cuda_devices": [0, 1]}}, "distributed", "torchrun --nproc_per_node N -m ipuflow train"),
])
def test_allennlp_keys_are_refused_naming_their_replacement(tiny_data, tmp_path, capsys, edit, path, replacement):
    import json

    from ipuflow.commands.cli import run
    from tests.experiment.conftest import tiny_config

    config = tiny_config(tiny_data)
    for section, values in edit.items():
        config[section] = {**config[section], **values} if isinstance(config.get(section), dict) else values
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert run(["train", str(tmp_path / "config.json"), "-s", str(tmp_path / "run"), "--dry-run"]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert path in message and replacement in message and "unknown key" not in message
