"""The fixed-shape data loader: combined batches, padding, buckets, shuffling, drop_last."""

from __future__ import annotations

import warnings

import numpy
import pytest
import torch

from ipuflow.config import ConfigurationError
from ipuflow.data.loader import DataLoader, FixedShapeDataLoader
from ipuflow.execution import NativeExecutor
from ipuflow.models.model import IGNORE_LABEL


def text_instances(count: int, seed: int = 0) -> list:
    rng = numpy.random.default_rng(seed)
    return [
        {
            "tokens": [int(token) for token in rng.integers(1, 50, size=int(rng.integers(1, 12)))],
            "label": index % 3,
            "weight": float(index) / 10,
            "features": rng.standard_normal(3).astype(numpy.float32),
            "text": f"instance {index}",
        }
        for index in range(count)
    ]


def test_fixed_shape_is_the_default_implementation():
    assert DataLoader.list_available()[0] == "fixed_shape"
    assert DataLoader.by_name("fixed_shape") is FixedShapeDataLoader


def test_combined_batches_have_fixed_shapes_dtypes_and_masks():
    instances = text_instances(10)
    loader = FixedShapeDataLoader(instances, batch_size=2, max_length=8)
    loader.set_batch_size_factor(2)
    assert loader.combined_batch_size == 4
    assert len(loader) == 2  # 10 // 4, the remainder dropped by default
    batches = list(loader)
    assert len(batches) == 2
    for batch in batches:
        assert set(batch) == {"tokens", "tokens_mask", "label", "weight", "features"}  # metadata stays out
        assert batch["tokens"].shape == (4, 8) and batch["tokens"].dtype == torch.int64
        assert batch["tokens_mask"].shape == (4, 8) and batch["tokens_mask"].dtype == torch.bool
        assert batch["label"].shape == (4,) and batch["label"].dtype == torch.int64
        assert batch["weight"].shape == (4,) and batch["weight"].dtype == torch.float32
        assert batch["features"].shape == (4, 3) and batch["features"].dtype == torch.float32
    first = batches[0]
    for row in range(4):
        expected = instances[row]["tokens"][:8]
        assert first["tokens"][row, : len(expected)].tolist() == expected
        assert first["tokens"][row, len(expected) :].eq(0).all()
        assert first["tokens_mask"][row].sum().item() == len(expected)
        assert first["label"][row].item() == instances[row]["label"]
    torch.testing.assert_close(first["features"][1], torch.from_numpy(instances[1]["features"]))


def test_without_max_length_sequences_pad_to_the_longest_in_the_data_set():
    instances = [{"tokens": [1, 2]}, {"tokens": [3]}, {"tokens": [4, 5, 6, 7, 8]}, {"tokens": []}]
    loader = FixedShapeDataLoader(instances, batch_size=2)
    shapes = {tuple(batch["tokens"].shape) for batch in loader}
    assert shapes == {(2, 5)}


def test_length_buckets_pick_the_smallest_bucket_that_fits_and_truncate_past_the_largest():
    instances = [{"tokens": [1] * 3}, {"tokens": [1] * 2}, {"tokens": [1] * 7}, {"tokens": [1] * 5}, {"tokens": [1] * 20}, {"tokens": [1]}]
    loader = FixedShapeDataLoader(instances, batch_size=2, length_buckets=[8, 4, 16])
    assert [tuple(batch["tokens"].shape) for batch in loader] == [(2, 4), (2, 8), (2, 16)]
    last = list(loader)[-1]
    assert last["tokens_mask"][0].sum().item() == 16  # truncated


def test_shuffle_depends_only_on_seed_and_epoch():
    instances = [{"label": index} for index in range(20)]

    def labels(loader: FixedShapeDataLoader, epoch: int) -> list:
        loader.set_epoch(epoch)
        return [value for batch in loader for value in batch["label"].tolist()]

    loader = FixedShapeDataLoader(instances, batch_size=5, shuffle=True, seed=3)
    again = FixedShapeDataLoader(instances, batch_size=5, shuffle=True, seed=3)
    assert labels(loader, 0) == labels(again, 0)
    assert labels(loader, 1) == labels(again, 1)
    assert labels(loader, 0) != labels(loader, 1)
    assert sorted(labels(loader, 1)) == list(range(20))
    assert labels(loader, 2) != labels(FixedShapeDataLoader(instances, batch_size=5, shuffle=True, seed=4), 2)
    # Resuming mid-epoch: the remaining batches are the same as the uninterrupted epoch's.
    loader.set_epoch(5)
    full = [batch["label"].tolist() for batch in loader]
    assert [batch["label"].tolist() for batch in loader.iter_from(2)] == full[2:]


def test_unshuffled_batches_keep_instance_order():
    loader = FixedShapeDataLoader([{"label": index} for index in range(8)], batch_size=4)
    assert [batch["label"].tolist() for batch in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_pad_on_batch_axis_keeps_the_last_batch_padded_with_ignored_rows():
    instances = [{"tokens": [index + 1] * (index + 1), "label": index, "score": 1.0} for index in range(7)]
    loader = FixedShapeDataLoader(instances, batch_size=2, pad_on_batch_axis=True, drop_last=True, max_length=4)
    loader.set_batch_size_factor(2)
    assert len(loader) == 2
    last = list(loader)[-1]
    assert last["label"].tolist() == [4, 5, 6, IGNORE_LABEL]
    assert last["tokens"].shape == (4, 4)
    assert not last["tokens_mask"][3].any() and last["tokens"][3].eq(0).all()
    assert last["score"].tolist() == [1.0, 1.0, 1.0, 0.0]


def test_drop_last_false_without_padding_warns_once_and_yields_a_short_batch():
    loader = FixedShapeDataLoader([{"label": index} for index in range(5)], batch_size=2, drop_last=False)
    assert len(loader) == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sizes = [len(batch["label"]) for batch in loader]
        list(loader)
    assert sizes == [2, 2, 1]
    assert len([warning for warning in caught if "not divisible" in str(warning.message)]) == 1


def test_num_workers_gives_the_same_batches():
    instances = text_instances(13)
    serial = FixedShapeDataLoader(instances, batch_size=3, shuffle=True, pad_on_batch_axis=True, max_length=6)
    parallel = FixedShapeDataLoader(instances, batch_size=3, shuffle=True, pad_on_batch_axis=True, max_length=6, num_workers=2)
    for a, b in zip(serial, parallel, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key])


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2, "max_length": 0}, "max_length"),
        ({"batch_size": 2, "max_length": 4, "length_buckets": [4]}, "length_buckets"),
        ({"batch_size": 2, "length_buckets": []}, "length_buckets"),
        ({"batch_size": 2, "num_workers": -1}, "num_workers"),
    ],
)
def test_bad_options_are_configuration_errors_naming_the_key(kwargs, key):
    with pytest.raises(ConfigurationError) as error:
        FixedShapeDataLoader([{"label": 1}], **kwargs)
    assert error.value.key == key  # relative to the section; the resolver adds where it sits


def test_inconsistent_fields_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="'features'"):
        FixedShapeDataLoader([{"features": [0.5, 1.0]}, {"features": [0.5]}], batch_size=1)
    with pytest.raises(ConfigurationError, match="'label'"):
        FixedShapeDataLoader([{"label": 1}, {"label": [1, 2]}], batch_size=1)


def test_the_loader_feeds_an_executor_with_its_batch_size_factor():
    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.EmbeddingBag(50, 3 * 1)
            self.output = torch.nn.Linear(3, 3)

        def forward(self, tokens, tokens_mask, label, **_):  # type: ignore[override]
            pooled = (self.embedding.weight[tokens] * tokens_mask.unsqueeze(-1)).sum(1)
            logits = self.output(pooled)
            return {"logits": logits, "loss": torch.nn.functional.cross_entropy(logits, label, ignore_index=IGNORE_LABEL)}

    model = Classifier()
    executor = NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", device_iterations=2, gradient_accumulation=2)
    loader = FixedShapeDataLoader(text_instances(21), batch_size=2, max_length=8, shuffle=True, pad_on_batch_axis=True)
    loader.set_batch_size_factor(executor.batch_size_factor)
    results = [executor(batch) for batch in loader]
    assert len(results) == len(loader) == 3
    assert sum(result.optimizer_updates for result in results) == 6


def test_built_from_config_with_the_instances_injected():
    from ipuflow.config import Params

    loader = DataLoader.from_params(Params({"batch_size": 2, "length_buckets": [4, 8], "shuffle": True}), instances=text_instances(9))
    assert isinstance(loader, FixedShapeDataLoader) and len(loader) == 4 and loader.length_buckets == [4, 8]
    with pytest.raises(ConfigurationError, match="batch_size"):
        DataLoader.from_params(Params({"batch_size": 0}), instances=text_instances(3))


def test_with_instances_keeps_every_setting_and_batches_the_new_instances():
    first, second = text_instances(8, seed=1), text_instances(5, seed=2)
    loader = FixedShapeDataLoader(first, batch_size=2, max_length=6, pad_on_batch_axis=True)
    loader.set_batch_size_factor(2)
    other = loader.with_instances(second)
    assert (other.combined_batch_size, len(other), len(loader)) == (4, 2, 2)
    reference = FixedShapeDataLoader(second, batch_size=2, max_length=6, pad_on_batch_axis=True)
    reference.set_batch_size_factor(2)
    for got, expected in zip(other, reference):
        assert set(got) == set(expected)
        for key in got:
            assert torch.equal(got[key], expected[key])
    assert [batch["label"].tolist() for batch in loader][0] == [instance["label"] for instance in first[:4]]
    with pytest.raises(ConfigurationError, match="non-empty"):
        loader.with_instances([])


def test_shape_samples_give_one_full_batch_per_bucket():
    instances = [{"tokens": [1] * length, "label": length % 2} for length in (3, 2, 7, 5, 20, 1)]
    bucketed = FixedShapeDataLoader(instances, batch_size=2, length_buckets=[8, 4, 16])
    bucketed.set_batch_size_factor(2)
    samples = bucketed.shape_samples()
    assert [tuple(sample["tokens"].shape) for sample in samples] == [(4, 4), (4, 8), (4, 16)]
    assert all(set(sample) == {"tokens", "tokens_mask", "label"} for sample in samples)
    fixed = FixedShapeDataLoader(instances, batch_size=2, max_length=6)
    assert [tuple(sample["tokens"].shape) for sample in fixed.shape_samples()] == [(2, 6)]
    too_few = FixedShapeDataLoader(instances, batch_size=8, max_length=6)
    assert too_few.shape_samples() == []
    padded = FixedShapeDataLoader(instances, batch_size=8, max_length=6, pad_on_batch_axis=True)
    (sample,) = padded.shape_samples()
    assert sample["label"].tolist()[6:] == [IGNORE_LABEL, IGNORE_LABEL]


def test_two_token_id_fields_each_get_their_own_tokens_and_mask():
    """Premise/hypothesis pairs: two text fields, indexed through a vocabulary, through the loader."""
    from ipuflow.data.fields import LabelField, TextField
    from ipuflow.data.instance import Instance
    from ipuflow.data.vocabulary import Vocabulary

    pairs = [("a man sleeps", "a person rests", "entailment"),
             ("the dog barks loudly at night", "a cat", "contradiction"),
             ("two kids", "children play outside in the sun", "neutral")]
    instances = [Instance({"premise": TextField(premise.split()), "hypothesis": TextField(hypothesis.split()),
                           "label": LabelField(label)}) for premise, hypothesis, label in pairs]
    vocab = Vocabulary.from_instances(instances)
    indexed = [instance.index(vocab) for instance in instances]
    for lengths in ({"max_length": 4}, {"length_buckets": [2, 8]}, {}):
        loader = FixedShapeDataLoader(indexed, batch_size=3, **lengths)
        loader.set_batch_size_factor(1)
        (batch,) = list(loader)
        assert {"premise", "premise_mask", "hypothesis", "hypothesis_mask", "label"} <= set(batch)
        for row, (premise, hypothesis, _) in enumerate(pairs):
            for name, text in (("premise", premise), ("hypothesis", hypothesis)):
                width = batch[name].shape[1]
                ids = [vocab.get_token_index(token) for token in text.split()][:width]
                assert batch[name][row, : len(ids)].tolist() == ids
                assert batch[f"{name}_mask"][row].tolist() == [True] * len(ids) + [False] * (width - len(ids))


class _CountingCollator:
    """Wraps a loader's collator: counts the batches it has collated, and fails on one batch."""

    def __init__(self, collator, failing_first_label=None):
        self.collator, self.failing_first_label, self.calls = collator, failing_first_label, 0

    def __call__(self, indices, rows, lengths=None, stream=(0,)):
        if self.failing_first_label is not None and int(indices[0]) == self.failing_first_label:
            raise ValueError(f"cannot collate the batch starting at instance {self.failing_first_label}")
        self.calls += 1
        return self.collator(indices, rows, lengths, stream)

    def __getattr__(self, name):
        return getattr(self.collator, name)


def test_small_batches_are_collated_in_runs_ahead_of_the_step():
    # Between two training steps the collator's code and data are out of the caches; collating a run
    # of small batches back to back pays that once. What the consumer sees does not change.
    loader = FixedShapeDataLoader([{"tokens": [index + 1] * 5, "label": index} for index in range(40)], batch_size=2)
    expected = [batch["label"].tolist() for batch in loader]
    counting = _CountingCollator(loader._collator)
    loader._collator = counting
    batches = iter(loader)
    assert next(batches)["label"].tolist() == [0, 1]
    assert counting.calls == 8  # the first batch and the seven after it
    assert [[0, 1]] + [batch["label"].tolist() for batch in batches] == expected
    assert counting.calls == 20


def test_a_batch_that_cannot_be_collated_fails_at_its_turn_after_the_batches_before_it():
    loader = FixedShapeDataLoader([{"label": index} for index in range(16)], batch_size=2)
    loader._collator = _CountingCollator(loader._collator, failing_first_label=6)
    batches = iter(loader)
    assert [next(batches)["label"].tolist() for _ in range(3)] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="starting at instance 6"):
        next(batches)
