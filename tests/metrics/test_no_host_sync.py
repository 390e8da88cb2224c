"""Accumulating a batch reads nothing back to the host: on CUDA, with torch's sync debug mode set to
raise, every built-in device-side metric takes batches; only `get_metric` reads (once)."""

import pytest
import torch

from ipuflow.metrics import CategoricalAccuracy, F1Measure, MeanAbsoluteError, Perplexity

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_metrics_accumulate_on_cuda_without_a_host_sync():
    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(0)
    metrics = [CategoricalAccuracy(), CategoricalAccuracy(top_k=3), F1Measure(average="macro"), F1Measure(average="none")]
    mae, perplexity = MeanAbsoluteError(), Perplexity()
    batches = []
    for _ in range(3):
        scores = torch.randn(4, 6, 5, device=device, generator=generator)
        gold = torch.randint(-1, 5, (4, 6), device=device, generator=generator)
        mask = torch.rand(4, 6, device=device, generator=generator) > 0.2
        batches.append((scores, gold, mask))
    # The first batch makes the counts (an allocation, not a sync).
    for metric in metrics:
        metric(*batches[0][:2])
    mae(batches[0][0][..., 0], batches[0][0][..., 1])
    perplexity(batches[0][0][..., 0].abs().sum(dim=1), batches[0][2].sum(dim=1))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for scores, gold, mask in batches[1:]:
            for metric in metrics:
                metric(scores, gold, mask=mask)
            mae(scores[..., 0], scores[..., 1], mask=mask)
            perplexity(scores[..., 0].abs().sum(dim=1), mask.sum(dim=1), mask=mask[:, 0])  # a language model's row sums
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for metric in [*metrics, mae, perplexity]:
        assert all(0.0 <= value for value in metric.get_metric().values())


def test_metrics_take_gold_values_from_the_host_beside_predictions_on_cuda():
    # A model's update_metrics sees its outputs on the executor's device and the batch on the host:
    # a user model that hands both to a metric unchanged must count what an all-CPU run counts.
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(5, 7, 4, generator=generator)
    gold = torch.randint(-1, 4, (5, 7), generator=generator)
    mask = torch.rand(5, 7, generator=generator) > 0.3
    for make in (CategoricalAccuracy, lambda: F1Measure(average="macro")):
        on_host, mixed = make(), make()
        on_host(scores, gold, mask=mask)
        mixed(scores.cuda(), gold, mask=mask)
        assert mixed.get_metric() == pytest.approx(on_host.get_metric())
    on_host_mae, mixed_mae = MeanAbsoluteError(), MeanAbsoluteError()
    on_host_mae(scores[..., 0], scores[..., 1], mask=mask)
    mixed_mae(scores[..., 0].cuda(), scores[..., 1], mask=mask)
    assert mixed_mae.get_metric() == pytest.approx(on_host_mae.get_metric())
