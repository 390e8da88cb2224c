"""The `huggingface` reader on local data: save_to_disk directories, parquet/JSON/CSV files,
splits, column mapping, ClassLabel names, streaming, and the offline error."""

from __future__ import annotations

import json

import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import DatasetReader, Vocabulary
from ipuflow.data.loader import FixedShapeDataLoader

datasets = pytest.importorskip("datasets")

ROWS = {
    "premise": ["a man sleeps", "a dog runs in the park", "two kids play", "nobody knows"],
    "hypothesis": ["a person rests", "a cat", "children play", "unknown"],
    "gold": [0, 1, 0, -1],
}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IPUFLOW_DATA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


@pytest.fixture
def saved(tmp_path):
    features = datasets.Features({
        "premise": datasets.Value("string"),
        "hypothesis": datasets.Value("string"),
        "gold": datasets.ClassLabel(names=["entailment", "neutral"]),
    })
    train = datasets.Dataset.from_dict(ROWS, features=features)
    validation = datasets.Dataset.from_dict({key: values[:2] for key, values in ROWS.items()}, features=features)
    directory = tmp_path / "nli"
    datasets.DatasetDict({"train": train, "validation": validation}).save_to_disk(str(directory))
    return directory


def reader(**options):
    config = {"type": "huggingface", "text_column": "premise", "text_pair_column": "hypothesis", "label_column": "gold"}
    return DatasetReader.from_params(Params({**config, **options}))


def test_save_to_disk_dataset_with_class_labels_pairs_and_splits(saved):
    train = reader().read_columnar(saved)
    assert len(train) == 3  # the row labelled -1 is skipped
    vocab = Vocabulary.from_instances([train])
    assert sorted(vocab.get_token_to_index_vocabulary("labels")) == ["entailment", "neutral"]
    indexed = train.indexed(vocab)
    assert vocab.get_token_from_index(indexed[1]["label"], "labels") == "neutral"
    assert indexed[1]["tokens_pair"] == vocab.get_token_indices(["a", "cat"])
    batch = next(iter(FixedShapeDataLoader(indexed, batch_size=3, max_length=6)))
    assert batch["tokens_mask"].sum(dim=1).tolist() == [3, 6, 3]
    assert batch["tokens_pair_mask"].sum(dim=1).tolist() == [3, 2, 2]
    assert len(reader(split="validation").read_columnar(saved)) == 2
    assert len(reader().read_columnar(f"{saved}#validation")) == 2
    instances = reader().read(f"{saved}#validation")
    assert [instance["label"].label for instance in instances] == ["entailment", "neutral"]


@pytest.mark.parametrize("suffix", ["parquet", "jsonl", "csv"])
@pytest.mark.parametrize("streaming", [False, True])
def test_local_files_through_load_dataset(tmp_path, suffix, streaming):
    rows = [{"sentence": "good film", "label": "fresh"}, {"sentence": "dull", "label": "rotten"}]
    path = tmp_path / f"data.{suffix}"
    if suffix == "parquet":
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    elif suffix == "csv":
        path.write_text("sentence,label\ngood film,fresh\ndull,rotten\n")
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    data = DatasetReader.from_params(Params({"type": "huggingface", "text_column": "sentence", "streaming": streaming}))
    dataset = data.read_columnar(path)
    vocab = Vocabulary.from_instances([dataset])
    assert dataset.indexed(vocab)[0] == {"tokens": vocab.get_token_indices(["good", "film"]), "label": vocab.get_token_index("fresh", "labels")}


def test_not_local_is_a_clear_error_and_nothing_is_downloaded(tmp_path):
    with pytest.raises(ConfigurationError, match="never downloads from the hub"):
        reader().read_columnar("stanfordnlp/snli")


def test_unknown_split_and_column_are_config_errors(saved):
    with pytest.raises(ConfigurationError, match="has splits"):
        reader(split="test").read_columnar(saved)
    with pytest.raises(ConfigurationError, match="no column 'sentence'"):
        reader(text_column="sentence").read_columnar(saved)
