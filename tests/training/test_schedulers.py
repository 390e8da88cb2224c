import math

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.training import LearningRateScheduler, MomentumScheduler


def sgd(lr: float = 1.0, momentum: float = 0.0) -> torch.optim.SGD:
    return torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=lr, momentum=momentum)


def build(config, optimizer, **extras):
    return LearningRateScheduler.from_params(Params(config), optimizer=optimizer, **extras)


def lrs_per_update(scheduler, optimizer, updates):
    values = []
    for update in range(1, updates + 1):
        scheduler.step_batch(update)
        values.append(optimizer.param_groups[0]["lr"])
    return values


def lrs_per_epoch(scheduler, optimizer, epochs, metric=None):
    values = [optimizer.param_groups[0]["lr"]]
    for _ in range(epochs - 1):
        scheduler.step(metric)
        values.append(optimizer.param_groups[0]["lr"])
    return values


def test_every_scheduler_is_registered():
    expected = {
        "step", "multi_step", "exponential", "reduce_on_plateau", "cosine", "noam", "slanted_triangular",
        "polynomial_decay", "linear_with_warmup", "combined", "constant", "constant_with_warmup",
        "cosine_with_warmup", "cosine_hard_restarts_with_warmup",
    }
    assert expected <= set(LearningRateScheduler.list_available())
    assert "inverted_triangular" in MomentumScheduler.list_available()


def test_polynomial_decay_pinned_values():
    optimizer = sgd()
    scheduler = build({"type": "polynomial_decay", "warmup_steps": 2, "end_learning_rate": 0.1, "power": 2},
                      optimizer, num_epochs=2, num_steps_per_epoch=3)
    assert lrs_per_update(scheduler, optimizer, 6) == pytest.approx([0.5, 1.0, 0.60625, 0.325, 0.15625, 0.1])


def test_linear_with_warmup_pinned_values():
    optimizer = sgd()
    scheduler = build({"type": "linear_with_warmup", "warmup_steps": 2}, optimizer, num_epochs=2, num_steps_per_epoch=3)
    assert lrs_per_update(scheduler, optimizer, 6) == pytest.approx([0.5, 1.0, 0.75, 0.5, 0.25, 0.0])


def test_step_based_schedules_start_at_the_first_updates_value_and_ignore_epochs():
    optimizer = sgd()
    scheduler = build({"type": "linear_with_warmup", "warmup_steps": 2}, optimizer, num_epochs=2, num_steps_per_epoch=3)
    assert optimizer.param_groups[0]["lr"] == 0.5
    scheduler.step(None)
    assert optimizer.param_groups[0]["lr"] == 0.5


def test_step_based_schedules_need_the_injected_lengths():
    with pytest.raises(ConfigurationError, match="num_steps_per_epoch"):
        build({"type": "polynomial_decay"}, sgd(), num_epochs=2)


def test_exponential_per_epoch():
    optimizer = sgd()
    scheduler = build({"type": "exponential", "gamma": 0.5}, optimizer)
    assert lrs_per_epoch(scheduler, optimizer, 4) == pytest.approx([1, 0.5, 0.25, 0.125])


def test_step_and_multi_step_per_epoch():
    optimizer = sgd()
    scheduler = build({"type": "step", "step_size": 2, "gamma": 0.1}, optimizer)
    assert lrs_per_epoch(scheduler, optimizer, 5) == pytest.approx([1, 1, 0.1, 0.1, 0.01])
    optimizer = sgd()
    scheduler = build({"type": "multi_step", "milestones": [1, 3], "gamma": 0.5}, optimizer)
    assert lrs_per_epoch(scheduler, optimizer, 4) == pytest.approx([1, 0.5, 0.5, 0.25])


def test_reduce_on_plateau_mode_follows_the_metric_sign():
    # "-loss": the trainer passes -loss; the schedule watches the loss in min mode.
    optimizer = sgd()
    scheduler = build({"type": "reduce_on_plateau", "patience": 1, "factor": 0.5}, optimizer, validation_metric="-loss")
    assert scheduler.mode == "min"
    for loss in [1.0, 0.9, 0.9, 0.9]:
        scheduler.step(-loss)
    assert optimizer.param_groups[0]["lr"] == 0.5

    optimizer = sgd()
    scheduler = build({"type": "reduce_on_plateau", "patience": 1, "factor": 0.5}, optimizer,
                      validation_metric="+accuracy")
    assert scheduler.mode == "max"
    for accuracy in [0.5, 0.6, 0.7, 0.8]:
        scheduler.step(accuracy)
    assert optimizer.param_groups[0]["lr"] == 1.0


def test_reduce_on_plateau_rejects_a_contradicting_mode_and_a_missing_metric():
    with pytest.raises(ConfigurationError, match="contradicts"):
        build({"type": "reduce_on_plateau", "mode": "max"}, sgd(), validation_metric="-loss")
    scheduler = build({"type": "reduce_on_plateau"}, sgd())
    with pytest.raises(ConfigurationError, match="validation"):
        scheduler.step(None)


def test_noam():
    optimizer = sgd()
    scheduler = build({"type": "noam", "model_size": 4, "warmup_steps": 2}, optimizer)
    expected = [4**-0.5 * min(s**-0.5, s * 2**-1.5) for s in range(1, 5)]
    assert lrs_per_update(scheduler, optimizer, 4) == pytest.approx(expected)


def test_warmup_schedules_count_updates():
    optimizer = sgd()
    scheduler = build({"type": "constant_with_warmup", "num_warmup_steps": 4}, optimizer)
    assert lrs_per_update(scheduler, optimizer, 6) == pytest.approx([0.25, 0.5, 0.75, 1, 1, 1])
    optimizer = sgd()
    scheduler = build({"type": "cosine_with_warmup", "num_warmup_steps": 2}, optimizer, num_epochs=2, num_steps_per_epoch=3)
    expected = [0.5, 1.0] + [0.5 * (1 + math.cos(math.pi * (s - 2) / 4)) for s in range(3, 7)]
    assert lrs_per_update(scheduler, optimizer, 6) == pytest.approx(expected)
    optimizer = sgd()
    scheduler = build({"type": "cosine_hard_restarts_with_warmup", "num_warmup_steps": 1, "num_training_steps": 5,
                       "num_cycles": 2}, optimizer)
    assert lrs_per_update(scheduler, optimizer, 5) == pytest.approx([1.0, 0.5, 1.0, 0.5, 0.0])


def test_slanted_triangular_rises_then_falls():
    optimizer = sgd()
    scheduler = build({"type": "slanted_triangular", "cut_frac": 0.25, "ratio": 4}, optimizer,
                      num_epochs=2, num_steps_per_epoch=4)
    # 8 updates, cut at 2: lr/4 → lr at update 3 → back to lr/4 at the end.
    assert lrs_per_update(scheduler, optimizer, 8) == pytest.approx(
        [0.25, 0.625, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375]
    )


def test_cosine_with_restarts_per_epoch():
    optimizer = sgd()
    scheduler = build({"type": "cosine", "t_initial": 2, "eta_mul": 0.5}, optimizer)
    assert lrs_per_epoch(scheduler, optimizer, 4) == pytest.approx([1.0, 0.5, 0.5, 0.25])


def test_combined_runs_schedules_in_sequence():
    optimizer = sgd()
    scheduler = LearningRateScheduler.from_params(
        Params({"type": "combined", "schedulers": [
            [1, {"type": "linear_with_warmup", "warmup_steps": 2}],
            [1, {"type": "exponential", "gamma": 0.5}],
        ]}),
        optimizer=optimizer, num_epochs=3, num_steps_per_epoch=4,
    )
    assert lrs_per_update(scheduler, optimizer, 4) == pytest.approx([0.5, 1.0, 0.5, 0.0])
    scheduler.step(None)
    assert optimizer.param_groups[0]["lr"] == 0.0  # the next span starts where the first left the lr
    scheduler2 = LearningRateScheduler.from_params(
        Params({"type": "combined", "schedulers": [[1, {"type": "constant"}], [2, {"type": "exponential", "gamma": 0.5}]]}),
        optimizer=sgd(0.8), num_epochs=3, num_steps_per_epoch=4,
    )
    values = lrs_per_epoch(scheduler2, scheduler2.optimizer, 5)
    assert values == pytest.approx([0.8, 0.8, 0.4, 0.4, 0.4])  # constant after the last span


def test_inverted_triangular_momentum():
    optimizer = sgd(momentum=0.9)
    scheduler = MomentumScheduler.from_params(
        Params({"type": "inverted_triangular", "cool_down": 2, "warm_up": 2, "ratio": 10}), optimizer=optimizer
    )
    values = [optimizer.param_groups[0]["momentum"]]
    for _ in range(5):
        scheduler.step()
        values.append(optimizer.param_groups[0]["momentum"])
    assert values == pytest.approx([0.9, 0.495, 0.09, 0.495, 0.9, 0.9])


def test_scheduler_state_round_trips_through_weights_only_load(tmp_path):
    optimizer = sgd()
    scheduler = build({"type": "reduce_on_plateau", "patience": 0}, optimizer)
    scheduler.step(-1.0)
    scheduler.step(-2.0)
    torch.save(scheduler.state_dict(), tmp_path / "s.pt")
    restored_optimizer = sgd()
    restored = build({"type": "reduce_on_plateau", "patience": 0}, restored_optimizer)
    restored.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    assert restored.state_dict()["torch"]["best"] == 1.0
    assert restored.last_epoch == scheduler.last_epoch


WARMUP_SCHEDULERS = [
    {"type": "constant_with_warmup"},
    {"type": "cosine_with_warmup"},
    {"type": "cosine_hard_restarts_with_warmup"},
    {"type": "linear_with_warmup"},
    {"type": "polynomial_decay"},
    {"type": "noam", "model_size": 4},
]


@pytest.mark.parametrize("config", WARMUP_SCHEDULERS, ids=lambda config: config["type"])
def test_every_warmup_schedule_takes_warmup_steps_and_warmup_ratio(config):
    """One spelling everywhere: `warmup_steps`, or `warmup_ratio` of the run's updates (here 2 × 10)."""
    by_steps, by_ratio = sgd(), sgd()
    steps = build({**config, "warmup_steps": 5}, by_steps, num_epochs=2, num_steps_per_epoch=10)
    ratio = build({**config, "warmup_ratio": 0.25}, by_ratio, num_epochs=2, num_steps_per_epoch=10)
    assert steps.warmup_steps == ratio.warmup_steps == 5
    assert lrs_per_update(steps, by_steps, 20) == pytest.approx(lrs_per_update(ratio, by_ratio, 20))


@pytest.mark.parametrize("name", ["constant_with_warmup", "cosine_with_warmup", "cosine_hard_restarts_with_warmup"])
def test_the_old_num_warmup_steps_spelling_still_works(name):
    old, new = sgd(), sgd()
    before = build({"type": name, "num_warmup_steps": 4}, old, num_epochs=2, num_steps_per_epoch=10)
    after = build({"type": name, "warmup_steps": 4}, new, num_epochs=2, num_steps_per_epoch=10)
    assert lrs_per_update(before, old, 20) == pytest.approx(lrs_per_update(after, new, 20))


@pytest.mark.parametrize(
    "config, message",
    [
        ({"type": "linear_with_warmup", "warmup_steps": 4, "warmup_ratio": 0.1}, "give warmup_steps or warmup_ratio"),
        ({"type": "cosine_with_warmup", "warmup_steps": 4, "num_warmup_steps": 5}, "num_warmup_steps"),
        ({"type": "constant_with_warmup", "warmup_ratio": 1.5}, "^warmup_ratio: expected a number >= 0 and < 1"),
        ({"type": "constant_with_warmup", "warmup_steps": -1}, "^warmup_steps: expected an int >= 0"),
        ({"type": "cosine_with_warmup"}, "needs warmup_steps or warmup_ratio"),
    ],
)
def test_warmup_mistakes_are_clear_errors(config, message):
    with pytest.raises(ConfigurationError, match=message):
        build(config, sgd(), num_epochs=2, num_steps_per_epoch=10)


def test_warmup_ratio_needs_the_length_of_the_run():
    with pytest.raises(ConfigurationError, match="warmup_ratio"):
        build({"type": "noam", "model_size": 4, "warmup_ratio": 0.1}, sgd())
