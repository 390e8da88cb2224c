"""Padding each combined batch to its own longest list where the executor takes any length, fixed
shapes where it compiles for them, and grouping instances by length (bucket, group_by_length)."""

from __future__ import annotations

import numpy
import pytest
import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.loader import FixedShapeDataLoader
from ipuflow.execution import NativeExecutor
from ipuflow.execution.executor import compiled_shapes_reason
from ipuflow.torch_features import torch_compile_available


def text_instances(count: int, seed: int = 0, longest: int = 40) -> list:
    rng = numpy.random.default_rng(seed)
    return [{"tokens": [int(token) for token in rng.integers(1, 50, size=int(rng.integers(1, longest)))], "label": index % 3}
            for index in range(count)]


def eager_executor() -> NativeExecutor:
    return NativeExecutor(torch.nn.Linear(2, 2), None, training=False, device="cpu")


def rounded(length: int, multiple: int = 1) -> int:
    return -(-length // multiple) * multiple


def test_the_eager_native_executor_gets_each_batch_padded_to_its_own_longest_list():
    instances = text_instances(40)
    loader = FixedShapeDataLoader(instances, batch_size=4, max_length=32)
    assert loader.padding_plan()["padding"] == "fixed"  # until an executor says what it takes
    eager_executor().prepare(loader, compile=False)
    plan = loader.padding_plan()
    # On a CPU each batch is padded to exactly its longest list: every padded position costs time there.
    assert plan == {"padding": "longest", "configured": "auto", "pad_to_multiple_of": 1, "truncate_at": 32,
                    "because": "the executor runs any sequence length"}
    fixed = FixedShapeDataLoader(instances, batch_size=4, max_length=32, padding="fixed")
    lengths = set()
    for start, (batch, reference) in enumerate(zip(loader, fixed)):
        longest = max(len(instance["tokens"]) for instance in instances[start * 4:start * 4 + 4])
        width = min(rounded(longest), 32)
        lengths.add(width)
        assert batch["tokens"].shape == batch["tokens_mask"].shape == (4, width)
        # The same tokens and masks as fixed padding, without the columns that only padding fills.
        assert torch.equal(batch["tokens"], reference["tokens"][:, :width])
        assert torch.equal(batch["tokens_mask"], reference["tokens_mask"][:, :width])
        assert not reference["tokens_mask"][:, width:].any()
    assert len(lengths) > 1


def test_pad_to_multiple_of_and_no_truncation_without_max_length():
    instances = [{"tokens": list(range(1, 1 + length)), "label": 0} for length in (3, 5, 13, 2, 0, 0)]
    loader = FixedShapeDataLoader(instances, batch_size=2, padding="longest", pad_to_multiple_of=4)
    assert [tuple(batch["tokens"].shape) for batch in loader] == [(2, 8), (2, 16), (2, 4)]  # empty lists: one multiple


def test_the_length_multiple_follows_the_device_unless_configured():
    instances = [{"tokens": list(range(1, 1 + length)), "label": 0} for length in (3, 5, 13, 2)]
    eager = eager_executor()
    assert eager.length_multiple == 1
    follows = FixedShapeDataLoader(instances, batch_size=2)
    # Before an executor prepares it, the plan says whose multiple it will take.
    assert FixedShapeDataLoader(instances, batch_size=2, padding="longest").padding_plan()["pad_to_multiple_of"] == (
        "the executor's (8 on CUDA, 1 on CPU)")
    configured = FixedShapeDataLoader(instances, batch_size=2, pad_to_multiple_of=4)
    for loader in (follows, configured):
        eager.prepare(loader, compile=False)
    assert [batch["tokens"].shape[1] for batch in follows] == [5, 13]
    assert [batch["tokens"].shape[1] for batch in configured] == [8, 16]
    # Tensor cores take lengths in multiples of 8: the executor on a CUDA device asks for that.
    on_cuda = object.__new__(NativeExecutor)
    on_cuda._device = torch.device("cuda")
    assert on_cuda.length_multiple == 8
    follows.set_length_multiple(on_cuda.length_multiple)
    assert [batch["tokens"].shape[1] for batch in follows] == [8, 16]


@pytest.mark.parametrize("executor_options", [{"compile": True}, None], ids=["native-compile", "poptorch"])
def test_executors_that_compile_for_shapes_keep_fixed_padding_and_refuse_longest(executor_options):
    if executor_options is not None and not torch_compile_available():
        pytest.skip("torch.compile is not available here")
    instances = text_instances(12)
    loader = FixedShapeDataLoader(instances, batch_size=4, length_buckets=[16, 40])
    if executor_options is None:
        reason = compiled_shapes_reason("poptorch")  # what the poptorch executor says (it needs the SDK)
        loader.set_fixed_shapes(reason)
    else:
        executor = NativeExecutor(torch.nn.Linear(2, 2), None, training=False, device="cpu", **executor_options)
        reason = executor.fixed_shapes_reason
        executor.prepare(loader, compile=False)
    assert reason is not None
    assert loader.padding_plan() == {"padding": "fixed", "configured": "auto", "length_buckets": [16, 40], "because": reason}
    assert {batch["tokens"].shape[1] for batch in loader} <= {16, 40}
    longest = FixedShapeDataLoader(instances, batch_size=4, padding="longest")
    with pytest.raises(ConfigurationError, match=r"^padding: \"longest\" gives every batch its own length, but "):
        longest.set_fixed_shapes(reason)


def test_fixed_padding_can_be_forced_on_the_eager_executor():
    loader = FixedShapeDataLoader(text_instances(12), batch_size=4, max_length=40, padding="fixed")
    eager_executor().prepare(loader)
    assert {batch["tokens"].shape[1] for batch in loader} == {40}
    assert loader.padding_plan()["because"] == "data_loader.padding is set"


def test_the_eager_executor_accepts_every_length_of_a_per_batch_padded_loader_but_not_other_changes():
    model = torch.nn.Module()
    model.embedding = torch.nn.Embedding(50, 3)

    def forward(tokens: torch.Tensor, tokens_mask: torch.Tensor, label: torch.Tensor) -> dict:
        return {"pooled": model.embedding(tokens).mean(1)}

    model.forward = forward  # type: ignore[method-assign]
    executor = NativeExecutor(model, None, training=False, device="cpu")
    loader = FixedShapeDataLoader(text_instances(40), batch_size=4)
    executor.prepare(loader)
    assert len({batch["tokens"].shape[1] for batch in loader}) > 1
    for batch in loader:
        assert executor(batch).outputs["pooled"].shape == (4, 3)
    batch = next(iter(loader))
    with pytest.raises(ValueError, match="Shape mismatch for tokens: expected 2 dims with dim 0 = 4"):
        executor({**batch, "tokens": batch["tokens"][:2]})
    with pytest.raises(ValueError, match="Data type mismatch for label"):
        executor({**batch, "label": batch["label"].float()})


def test_replicas_pad_their_rows_as_one_process_pads_the_combined_batch():
    instances = text_instances(48, seed=3)
    whole = FixedShapeDataLoader(instances, batch_size=3, shuffle=True, padding="longest")
    whole.set_batch_size_factor(4)
    combined = list(whole)
    for replica in range(2):
        loader = FixedShapeDataLoader(instances, batch_size=3, shuffle=True, padding="longest")
        loader.set_batch_size_factor(4)
        loader.select_replica(replica, 2)
        for own, batch in zip(loader, combined):
            # [replica][micro_batch] within each accumulation step: this replica's rows are 3 of each 6.
            rows = torch.cat([torch.arange(step * 6 + replica * 3, step * 6 + replica * 3 + 3) for step in range(2)])
            assert torch.equal(own["tokens"], batch["tokens"][rows])
            assert torch.equal(own["tokens_mask"], batch["tokens_mask"][rows])


@pytest.mark.parametrize("grouping", ["bucket", "group_by_length"])
def test_length_grouping_is_seeded_resumable_and_cuts_padding(grouping):
    instances = text_instances(410, seed=1, longest=60)  # 25 combined batches of 16, and 10 left over

    def loader(**settings) -> FixedShapeDataLoader:
        built = FixedShapeDataLoader(instances, batch_size=8, shuffle=True, padding="longest", pad_to_multiple_of=1,
                                     **settings)
        built.set_batch_size_factor(2)
        return built

    grouped, again, plain = loader(length_grouping=grouping, seed=5), loader(length_grouping=grouping, seed=5), loader(seed=5)
    for epoch in (0, 1):
        for each in (grouped, again, plain):
            each.set_epoch(epoch)
        order = grouped.order()
        assert sorted(order.tolist()) == list(range(410))
        assert numpy.array_equal(order, again.order())
        batches = list(grouped)
        assert [tuple(batch["tokens"].shape) for batch in grouped.iter_from(7)] == [tuple(b["tokens"].shape) for b in batches[7:]]
        padded = sum(batch["tokens"].numel() for batch in batches)
        assert padded < 0.75 * sum(batch["tokens"].numel() for batch in plain)
        if grouping == "bucket":  # the last, incomplete batch holds the instances a plain shuffle leaves there
            assert numpy.array_equal(order[400:], plain.order()[400:])
    grouped.set_epoch(0)
    first = grouped.order()
    grouped.set_epoch(1)
    assert not numpy.array_equal(first, grouped.order())


def test_group_by_length_sorts_megabatches_longest_first_and_starts_with_the_longest():
    instances = text_instances(640, seed=2, longest=80)
    loader = FixedShapeDataLoader(instances, batch_size=4, shuffle=True, length_grouping="group_by_length")
    order = loader.order()
    lengths = numpy.array([len(instance["tokens"]) for instance in instances])
    assert lengths[order[0]] == lengths.max()
    megabatch = 640 // (4 * 4) * 4  # under 50 batches: a quarter of the data each
    for start in range(0, 640, megabatch):
        chunk = lengths[order[start + 1:start + megabatch]]
        assert (numpy.diff(chunk) <= 0).all()


def test_bucket_sorts_each_batch_within_its_noise():
    instances = text_instances(300, seed=4, longest=100)
    loader = FixedShapeDataLoader(instances, batch_size=10, shuffle=True, length_grouping="bucket", padding_noise=0.0)
    lengths = numpy.array([len(instance["tokens"]) for instance in instances])
    batches = lengths[loader.order()].reshape(30, 10)
    spans = sorted((batch.min(), batch.max()) for batch in batches)
    assert all(high <= next_low for (_, high), (next_low, _) in zip(spans, spans[1:]))


def test_length_grouping_settings_are_checked():
    instances = [{"tokens": [1, 2], "pair": [3], "label": 0}] * 4
    with pytest.raises(ConfigurationError, match=r"^sorting_keys: expected a non-empty list of token-id fields \(tokens, pair\), found"):
        FixedShapeDataLoader(instances, batch_size=2, length_grouping="bucket", sorting_keys=["label"])
    with pytest.raises(ConfigurationError, match=r"^sorting_keys: sorting_keys orders batches by length only with length_grouping"):
        FixedShapeDataLoader(instances, batch_size=2, sorting_keys=["tokens"])
    with pytest.raises(ConfigurationError, match=r"^length_grouping: "):
        FixedShapeDataLoader(instances, batch_size=2, length_grouping="sorted")
    with pytest.raises(ConfigurationError, match=r"^padding: "):
        FixedShapeDataLoader(instances, batch_size=2, padding="max_length")
    with pytest.raises(ConfigurationError, match=r"^pad_to_multiple_of: "):
        FixedShapeDataLoader(instances, batch_size=2, pad_to_multiple_of=0)
    assert FixedShapeDataLoader(instances, batch_size=2, length_grouping="bucket").sorting_keys == ["tokens"]
    without_sequences = [{"label": 0}] * 4
    with pytest.raises(ConfigurationError, match=r"^length_grouping: expected instances with a token-id list field"):
        FixedShapeDataLoader(without_sequences, batch_size=2, length_grouping="bucket")


def test_evaluation_order_is_kept_with_length_grouping_when_not_shuffling():
    loader = FixedShapeDataLoader(text_instances(30), batch_size=4, length_grouping="bucket")
    assert numpy.array_equal(loader.order(), numpy.arange(30))


def test_worker_processes_pad_each_batch_as_the_main_process_does():
    instances = text_instances(40, seed=6)
    in_process = FixedShapeDataLoader(instances, batch_size=4, shuffle=True, padding="longest")
    in_workers = FixedShapeDataLoader(instances, batch_size=4, shuffle=True, padding="longest", num_workers=1)
    pairs = list(zip(in_process, in_workers))
    assert len(pairs) == 10 and len({batch["tokens"].shape[1] for batch, _ in pairs}) > 1
    for batch, other in pairs:
        assert batch.keys() == other.keys() and all(torch.equal(batch[key], other[key]) for key in batch)
