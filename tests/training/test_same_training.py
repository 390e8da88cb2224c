"""The trainer does the same training as a hand-written PyTorch loop: same batches, same updates.

Both run the same model (with dropout) from the same weights and RNG state over the loader's batches
in the loader's shuffled order, with AdamW, grad-norm clipping and a linear warm-up/decay schedule
counted as ipuflow documents it (update k of a warm-up of w runs at lr·k/w; the decay reaches 0 at
the last update). After every update the weights must be the same, to the bit.
"""

import copy
from typing import Dict, List

import torch

import ipuflow.execution.native  # noqa: F401  (registers the native executor)
from ipuflow.config import Params
from ipuflow.training import Trainer, TrainerCallback
from tests.training.regression import LinearRegression, loaders

LR, WARMUP, CLIP = 0.05, 3, 0.5


def snapshot(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def linear_with_warmup_factor(update: int, total: int) -> float:
    if update < WARMUP:
        return update / WARMUP
    return max(0.0, (total - update) / (total - WARMUP))


def hand_loop(model: torch.nn.Module, batches: List[Dict[str, torch.Tensor]]) -> List[Dict[str, torch.Tensor]]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    weights = []
    model.train()
    for update, batch in enumerate(batches, 1):
        for group in optimizer.param_groups:
            group["lr"] = LR * linear_with_warmup_factor(update, len(batches))
        loss = model(**batch)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        weights.append(snapshot(model))
    return weights


RECORDED: List[Dict[str, torch.Tensor]] = []


@TrainerCallback.register("test_weights_after_each_update", exist_ok=True)
class WeightsAfterEachUpdate(TrainerCallback):
    def on_step_end(self, event) -> None:
        RECORDED.append(snapshot(event.trainer.model))


def test_trainer_weights_equal_a_hand_written_loop_after_every_update(tmp_path):
    torch.manual_seed(0)
    model = LinearRegression(dropout=0.3)
    initial = copy.deepcopy(model.state_dict())
    train_loader, _ = loaders(train=40, batch_size=4, shuffle=True)
    train_loader.set_epoch(0)
    batches = [dict(batch) for batch in train_loader]  # the order the trainer reads in epoch 0

    RECORDED.clear()
    trainer = Trainer.from_params(
        Params({
            "num_epochs": 1,
            # The hand loop decays every weight, with torch's single-tensor AdamW (its default on the CPU).
            "optimizer": {"type": "adamw", "lr": LR, "weight_decay": 0.01, "no_decay": [], "fused": False, "foreach": False},
            "learning_rate_scheduler": {"type": "linear_with_warmup", "warmup_steps": WARMUP},
            "executor": {"type": "native", "device": "cpu", "max_grad_norm": CLIP},
            "checkpointer": None,
            "enable_default_callbacks": False,
            "callbacks": [{"type": "test_weights_after_each_update"}],
        }),
        model=model,
        serialization_dir=str(tmp_path / "run"),
        data_loader=train_loader,
    )
    torch.manual_seed(7)
    trainer.train()

    hand = LinearRegression(dropout=0.3)
    hand.load_state_dict(initial)
    torch.manual_seed(7)
    expected = hand_loop(hand, batches)

    assert len(RECORDED) == len(expected) == 10
    for update, (got, want) in enumerate(zip(RECORDED, expected), 1):
        for name in want:
            assert torch.equal(got[name], want[name]), f"{name} differs after update {update}"
