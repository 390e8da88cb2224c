"""Issue 35: the Hugging Face Trainer's optimizer-step events (`on_pre_optimizer_step`,
`on_optimizer_step`, `on_substep_end`) fire inside the native executor's step, and poptorch refuses
a callback that overrides them instead of skipping it silently."""

import sys

import pytest
import torch

from ipuflow.config import ConfigurationError
from ipuflow.training import TrainerCallback
from tests.training.test_trainer import build


class StepEvents(TrainerCallback):
    """Records (event, global_step, batch_number) of the optimizer-step events, and whether the
    gradients are there when the optimizer is about to step."""

    def __init__(self, serialization_dir: str) -> None:
        super().__init__(serialization_dir)
        self.events = []
        self.gradients_present = []

    def on_substep_end(self, event):
        self.events.append(("substep", event.state.global_step, event.batch_number))

    def on_pre_optimizer_step(self, event):
        self.events.append(("pre", event.state.global_step, event.batch_number))
        self.gradients_present.append(all(p.grad is not None for p in event.trainer.model.parameters()))

    def on_optimizer_step(self, event):
        self.events.append(("step", event.state.global_step, event.batch_number))


def test_events_fire_around_every_update_under_gradient_accumulation_and_device_iterations(tmp_path):
    recorder = StepEvents(str(tmp_path))
    # 2 updates per host call, each on 3 accumulated micro-batches of 2 replicas: 16 rows per call, 2 calls.
    trainer = build(tmp_path, {"num_epochs": 1, "executor": {"type": "native", "device": "cpu", "device_iterations": 2,
                                                             "gradient_accumulation": 3, "replication_factor": 2}},
                    train=24, validation=4, batch_size=1)
    trainer.add_callback(recorder)
    trainer.train()
    expected = []
    for call in (1, 2):
        for update in range(2):
            before = 2 * (call - 1) + update
            expected += [("substep", before, call)] * 2 + [("pre", before, call), ("step", before, call)]
    assert recorder.events == expected
    assert recorder.gradients_present == [True] * 4
    assert trainer.state.global_step == 4  # the temporary count during the events is not kept


def test_accumulation_two_gives_one_substep_per_update(tmp_path):
    recorder = StepEvents(str(tmp_path))
    trainer = build(tmp_path, {"num_epochs": 1, "executor": {"type": "native", "device": "cpu",
                                                             "gradient_accumulation": 2}},
                    train=8, validation=4, batch_size=2)
    trainer.add_callback(recorder)
    trainer.train()
    names = [name for name, _, _ in recorder.events]
    assert names == ["substep", "pre", "step"] * 2


def test_the_step_runs_without_hooks_when_no_callback_listens(tmp_path):
    trainer = build(tmp_path, {"num_epochs": 1, "executor": {"type": "native", "device": "cpu"}}, train=8, validation=4)
    assert trainer.executor._step_hooks is None
    recorder = StepEvents(str(tmp_path))
    trainer.add_callback(recorder)
    assert trainer.executor._step_hooks is not None
    trainer.remove_callback(recorder)
    trainer.add_callback(TrainerCallback(str(tmp_path)))  # listens to nothing
    assert trainer.executor._step_hooks is None


def test_poptorch_refuses_a_callback_that_overrides_them(tmp_path, monkeypatch):
    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    TrainerCallback.register("test-optimizer-step-events", exist_ok=True)(StepEvents)
    with pytest.raises(ConfigurationError) as raised:
        build(tmp_path, {"num_epochs": 1, "executor": {"type": "poptorch"},
                         "callbacks": ["test-optimizer-step-events"]}, train=8, validation=4)
    message = str(raised.value)
    assert message.startswith("trainer.callbacks: ") or message.startswith("callbacks: ")
    assert "on_pre_optimizer_step" in message and "the poptorch executor" in message and "StepEvents" in message


def test_poptorch_takes_callbacks_that_do_not_override_them(tmp_path, monkeypatch):
    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    trainer = build(tmp_path, {"num_epochs": 1, "executor": {"type": "poptorch"}, "enable_default_callbacks": True},
                    train=8, validation=4)
    assert trainer.callbacks


class GradientNorms:
    """A Hugging Face callback that reads the gradients' norm before every update (defined lazily below)."""


def _hugging_face_callback():
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers.TrainerCallback, "on_pre_optimizer_step"):
        pytest.skip("this transformers has no optimizer-step events")

    class Norms(transformers.TrainerCallback):
        seen = []

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
            Norms.seen.append((state.global_step, float(norm)))

    return Norms


def test_hugging_face_callbacks_see_the_events_only_where_they_override_them(tmp_path):
    from ipuflow.training.callbacks.huggingface.callback import HuggingFaceCallback

    global GradientNorms
    GradientNorms = _hugging_face_callback()
    plain = HuggingFaceCallback(str(tmp_path), "transformers.PrinterCallback")
    assert not {"on_pre_optimizer_step", "on_optimizer_step", "on_substep_end"} & {name for name, _ in plain.listeners()}

    callback = {"type": "huggingface", "callback": f"{__name__}.GradientNorms"}
    trainer = build(tmp_path, {"num_epochs": 1, "callbacks": [callback],
                               "executor": {"type": "native", "device": "cpu", "gradient_accumulation": 2}},
                    train=8, validation=4, batch_size=2)
    trainer.train()
    assert [step for step, _ in GradientNorms.seen] == [0, 1]
    assert all(norm > 0 for _, norm in GradientNorms.seen)
