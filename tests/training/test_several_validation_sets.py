"""Issue 35: a trainer given several validation loaders ({name: loader}) scores each at every
validation, keys its metrics by name, and reports them to Hugging Face callbacks as the Trainer
does with a dict of evaluation sets (``eval_<name>_loss``)."""

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.training import Trainer
from tests.training.regression import LinearRegression, loaders

transformers = pytest.importorskip("transformers")


class EvaluationKeys(transformers.TrainerCallback):
    """Records the metric names of every `on_evaluate`, and the best metric the Trainer state holds."""

    seen = []

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        EvaluationKeys.seen.append((sorted(metrics), args.metric_for_best_model))


def build(tmp_path, **config):
    import torch

    torch.manual_seed(0)
    train, near = loaders(train=16, validation=8, batch_size=4)
    _, far = loaders(train=4, validation=12, batch_size=4)
    full = {"num_epochs": 2, "optimizer": {"type": "sgd", "lr": 0.05}, "enable_default_callbacks": False,
            "validation_metric": "-far_loss", **config}
    return Trainer.from_params(Params(full), model=LinearRegression(), serialization_dir=str(tmp_path),
                               data_loader=train, validation_data_loader={"near": near, "far": far})


def test_every_set_is_scored_and_hugging_face_callbacks_see_eval_name_metrics(tmp_path):
    EvaluationKeys.seen.clear()
    trainer = build(tmp_path, callbacks=[{"type": "huggingface", "callback": f"{__name__}.EvaluationKeys"}])
    metrics = trainer.train()
    assert {"validation_near_loss", "validation_far_loss", "best_validation_far_loss"} <= set(metrics)
    assert trainer.num_validation_batches == 2 + 3
    assert trainer.validation_data_loader is trainer.validation_data_loaders["near"]
    keys, metric_for_best_model = EvaluationKeys.seen[0]
    assert {"eval_near_loss", "eval_far_loss"} <= set(keys) and "eval_loss" not in keys
    assert metric_for_best_model == "far_loss"
    assert trainer.state.best_metric == pytest.approx(metrics["best_validation_far_loss"])
    assert "validation_far_loss" in trainer.state.log_history[-1]


def test_a_metric_of_no_set_is_refused_when_the_trainer_is_built(tmp_path):
    with pytest.raises(ConfigurationError, match="validation_metric: 'loss' is no validation set's metric.*'-near_loss'"):
        build(tmp_path, validation_metric="-loss")
