"""The `perplexity` metric: exp of the mean token loss over every token of every batch."""

import math

import pytest
import torch

from ipuflow.metrics import Metric, Perplexity
from ipuflow.config import Params
from ipuflow.models.huggingface.language_modelling import token_losses


def test_perplexity_is_the_exp_of_the_mean_loss_per_token_not_a_mean_over_batches():
    metric = Perplexity()
    metric(torch.tensor([2.0, 4.0]), torch.tensor([1, 3]))  # 6 over 4 tokens
    metric(torch.tensor([9.0, 100.0]), torch.tensor([2, 7]), mask=torch.tensor([True, False]))  # a padding row
    assert metric.get_metric()[""] == pytest.approx(math.exp((2 + 4 + 9) / (1 + 3 + 2)))
    state = metric.state_dict()
    assert metric.get_metric(reset=True)[""] == pytest.approx(math.exp(15 / 6))
    assert metric.get_metric()[""] == 1.0  # nothing since the reset
    resumed = Metric.from_params(Params({"type": "perplexity"}))
    resumed.load_state_dict(state)
    assert resumed.get_metric()[""] == pytest.approx(math.exp(15 / 6))


def test_token_losses_give_the_mean_loss_and_per_row_sums_that_padding_leaves_out():
    logits = torch.randn(3, 5, 11, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[1, 2, 3, -100, -100], [4, 5, 6, 7, 8], [-100] * 5])
    outputs = token_losses(logits, labels, 0.0)
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1), ignore_index=-100)
    assert outputs["loss"] == pytest.approx(float(expected))
    assert outputs["lm_tokens"].tolist() == [3, 5, 0]
    assert outputs["lm_loss_sum"][2] == 0.0
    assert float(outputs["lm_loss_sum"].sum() / outputs["lm_tokens"].sum()) == pytest.approx(float(expected))
    metric = Perplexity()
    metric(outputs["lm_loss_sum"], outputs["lm_tokens"])
    assert metric.get_metric()[""] == pytest.approx(math.exp(float(expected)), rel=1e-5)
    smoothed = token_losses(logits, labels, 0.1)
    assert smoothed["loss"] > outputs["loss"] and torch.equal(smoothed["lm_loss_sum"], outputs["lm_loss_sum"])
    assert token_losses(logits[2:], labels[2:], 0.0)["loss"] == 0.0  # all padding: 0, not NaN
