"""Dataset readers on fixture files, including the errors that name the file and line."""

from pathlib import Path

import numpy
import pytest

from ipuflow.config import ConfigurationError, Params
from ipuflow.data import (
    DatasetReader,
    RegexTokenizer,
    TensorClassificationReader,
    TextClassificationCsvReader,
    TextClassificationJsonReader,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def test_json_reader_reads_text_and_labels_skipping_blank_lines():
    instances = TextClassificationJsonReader().read(FIXTURES / "text_classification.jsonl")
    assert len(instances) == 5
    first = instances[0]
    assert first["tokens"].tokens == ["A", "gorgeous,", "witty", "film."]
    assert first["label"].label == "fresh"
    assert first["text"].value == "A gorgeous, witty film."
    assert instances[1]["tokens"].tokens == ["Dull", "and", "overlong."]


def test_json_reader_options():
    reader = TextClassificationJsonReader(tokenizer=RegexTokenizer(), max_instances=2, max_tokens=3, keep_text=False)
    instances = reader.read(FIXTURES / "text_classification.jsonl")
    assert len(instances) == 2
    assert instances[0]["tokens"].tokens == ["a", "gorgeous", ","]
    assert "text" not in instances[0]


def test_json_reader_custom_keys(tmp_path):
    path = tmp_path / "custom.jsonl"
    path.write_text('{"sentence": "good", "sentiment": 1}\n')
    (instance,) = TextClassificationJsonReader(text_key="sentence", label_key="sentiment").read(path)
    assert instance["tokens"].tokens == ["good"] and instance["label"].label == "1"


def test_unlabelled_file_gives_instances_without_labels():
    instances = TextClassificationJsonReader().read(FIXTURES / "unlabelled.jsonl")
    assert [sorted(instance) for instance in instances] == [["text", "tokens"], ["text", "tokens"]]


def test_malformed_json_names_file_and_line():
    with pytest.raises(ConfigurationError, match=r"malformed\.jsonl:3: not valid JSON"):
        TextClassificationJsonReader().read(FIXTURES / "malformed.jsonl")


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"text": "a", "label": "x"}\n[1, 2]\n', r"bad\.jsonl:2: expected a JSON object per line, found list"),
        ('{"text": "a", "label": "x"}\n{"txt": "b", "label": "x"}\n', r"bad\.jsonl:2: no key 'text' \(keys found: \['label', 'txt'\]\)"),
        ('{"text": 5, "label": "x"}\n', r"bad\.jsonl:1: the text 'text' must be a string, found 5"),
        ('{"text": "a", "label": 1.5}\n', r"bad\.jsonl:1: the label 'label' must be a string or an int"),
        ('{"text": "a", "label": "x"}\n{"text": "b"}\n', r"bad\.jsonl:2: this record has no label 'label' but the record at line 1 has"),
    ],
)
def test_bad_records_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        TextClassificationJsonReader().read(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigurationError, match=r"Data file '.*missing\.jsonl' does not exist"):
        TextClassificationJsonReader().read(tmp_path / "missing.jsonl")


def test_instance_from_json_for_predictions():
    reader = TextClassificationJsonReader()
    assert sorted(reader.instance_from_json({"text": "so good"})) == ["text", "tokens"]
    assert reader.instance_from_json({"text": "so good", "label": "fresh"})["label"].label == "fresh"
    with pytest.raises(ConfigurationError, match="JSON input: no key 'text'"):
        reader.instance_from_json({"sentence": "so good"})


def test_csv_reader_with_quoted_newlines():
    instances = TextClassificationCsvReader().read(FIXTURES / "text_classification.csv")
    assert [instance["label"].label for instance in instances] == ["fresh", "rotten", "fresh"]
    assert instances[1]["text"].value == "Dull and\noverlong."


def test_csv_reader_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("text,label\ngood,fresh\nbad,rotten,extra\n")
    with pytest.raises(ConfigurationError, match=r"bad\.csv:3: expected 2 fields as in the header, found 3"):
        TextClassificationCsvReader().read(path)
    with pytest.raises(ConfigurationError, match=r"bad\.csv:1: the header has no text column 'sentence'"):
        TextClassificationCsvReader(text_column="sentence").read(path)


def test_csv_reader_with_tab_delimiter_and_no_label_column(tmp_path):
    path = tmp_path / "data.tsv"
    path.write_text("sentence\nvery good\n")
    (instance,) = TextClassificationCsvReader(text_column="sentence", delimiter="\t").read(path)
    assert instance["tokens"].tokens == ["very", "good"] and "label" not in instance


def test_tensor_reader():
    instances = TensorClassificationReader().read(FIXTURES / "tensor_classification.jsonl")
    assert len(instances) == 3
    numpy.testing.assert_array_equal(instances[1]["features"].values, numpy.array([1, 0, 0, 0], dtype=numpy.float32))
    assert instances[1]["label"].label == "7"


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"features": [1, 2], "label": 0}\n{"features": [1, 2, 3], "label": 0}\n', r"bad\.jsonl:2: 'features' has 3 values, but the first record has 2"),
        ('{"features": [1, "x"], "label": 0}\n', r"bad\.jsonl:1: 'features' must be a list of numbers"),
        ('{"features": [1, NaN], "label": 0}\n', r"bad\.jsonl:1: 'features' holds a NaN"),
        ('{"features": [], "label": 0}\n', r"bad\.jsonl:1: 'features' is empty"),
    ],
)
def test_tensor_reader_errors_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        TensorClassificationReader().read(path)


def test_tensor_reader_checks_feature_dim(tmp_path):
    with pytest.raises(ConfigurationError, match=r"tensor_classification\.jsonl:1: 'features' has 4 values, but feature_dim has 64"):
        TensorClassificationReader(feature_dim=64).read(FIXTURES / "tensor_classification.jsonl")


def test_readers_from_config():
    reader = DatasetReader.from_params(Params({"tokenizer": {"type": "regex", "lowercase": False}, "max_tokens": 2}))
    assert isinstance(reader, TextClassificationJsonReader)
    assert reader.read(FIXTURES / "text_classification.jsonl")[0]["tokens"].tokens == ["A", "gorgeous"]

    csv_reader = DatasetReader.from_params(Params({"type": "text_classification_csv", "tokenizer": "whitespace"}))
    assert len(csv_reader.read(FIXTURES / "text_classification.csv")) == 3

    tensor_reader = DatasetReader.from_params(Params({"type": "tensor_classification", "feature_dim": 4}))
    assert len(tensor_reader.read(FIXTURES / "tensor_classification.jsonl")) == 3

    with pytest.raises(ConfigurationError, match="max_instances"):
        DatasetReader.from_params(Params({"max_instances": 0}))
