"""Issue 33: the trainer is constructed in one place, its own classmethod, whose checkpoints hold every
stateful part it wires, in restore order."""

import ipuflow.execution.native  # noqa: F401  (registers the native executor)
from ipuflow.training import GradientDescentTrainer
from ipuflow.training.loop import gradient_descent_trainer
from tests.training.test_trainer import build


def test_the_trainer_is_built_by_a_classmethod_of_its_own_class():
    constructor = GradientDescentTrainer.__dict__["from_partial_objects"]
    assert isinstance(constructor, classmethod)
    assert constructor.__func__.__module__ == gradient_descent_trainer.__name__
    assert constructor.__func__.__qualname__ == "GradientDescentTrainer.from_partial_objects"


def test_a_checkpoint_holds_every_configured_stateful_part_in_restore_order(tmp_path):
    trainer = build(tmp_path, {"learning_rate_scheduler": {"type": "step", "step_size": 1},
                               "momentum_scheduler": None, "moving_average": {"type": "exponential"}})
    with trainer.get_checkpoint_state() as checkpoint:
        keys = list(checkpoint.training_state)
    assert keys == ["version", "trainer_state", "executor", "metric_tracker", "running_loss", "callbacks",
                    "model_metrics", "learning_rate_scheduler", "moving_average", "data_loader", "rng"]


def test_a_trainer_without_optional_parts_checkpoints_only_the_ones_it_has(tmp_path):
    trainer = build(tmp_path, {})
    with trainer.get_checkpoint_state() as checkpoint:
        keys = list(checkpoint.training_state)
    assert keys == ["version", "trainer_state", "executor", "metric_tracker", "running_loss", "callbacks",
                    "model_metrics", "data_loader", "rng"]
