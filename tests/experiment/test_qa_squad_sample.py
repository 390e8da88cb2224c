"""The runnable QA example (issue 36, point 9): scripts/generate_squad_sample.py writes the shipped
data/squad_sample byte for byte, every answer span is exact, and configs/qa_squad_minilm.jsonnet
trains on a slice of it and scores answers."""

import importlib.util
import json
from pathlib import Path

import pytest

from ipuflow.commands.cli import run

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "squad_sample"
CONFIG = ROOT / "configs" / "qa_squad_minilm.jsonnet"


def generator():
    spec = importlib.util.spec_from_file_location("generate_squad_sample", ROOT / "scripts" / "generate_squad_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def questions(document):
    return [(paragraph["context"], qa) for article in document["data"] for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_the_shipped_sample_is_what_the_generator_writes(tmp_path, split, monkeypatch):
    monkeypatch.setattr("sys.argv", ["generate_squad_sample.py", "--output-dir", str(tmp_path)])
    generator().main()
    assert (tmp_path / f"{split}.json").read_bytes() == (SAMPLE / f"{split}.json").read_bytes()


@pytest.mark.parametrize("split", ["train", "validation"])
def test_every_answer_span_is_exact_and_a_quarter_are_unanswerable(split):
    document = json.loads((SAMPLE / f"{split}.json").read_text(encoding="utf-8"))
    assert document["version"] == "v2.0"
    pairs = questions(document)
    for context, qa in pairs:
        assert qa["is_impossible"] == (not qa["answers"])
        for answer in qa["answers"]:
            start = answer["answer_start"]
            assert context[start:start + len(answer["text"])] == answer["text"], qa["id"]
            # The answer is a whole phrase of the context, not the inside of a word.
            assert start == 0 or not context[start - 1].isalnum()
            assert not context[start + len(answer["text"]):][:1].isalnum()
    impossible = sum(qa["is_impossible"] for _, qa in pairs)
    assert impossible * 4 == len(pairs)
    assert len({qa["id"] for _, qa in pairs}) == len(pairs)


def test_an_unanswerable_question_names_a_person_of_its_context():
    document = generator().document(20, seed=3, prefix="x")
    for context, qa in questions(document):
        name = next(word for word in qa["question"].replace("'s", "").replace("?", "").split() if word[0].isupper()
                    and word not in {"Where", "In", "When", "What", "Which", "At", "By"})
        assert name in context


@pytest.mark.slow
def test_the_config_trains_on_a_slice_and_scores_answers(tmp_path):
    overrides = {"dataset_reader.max_instances": 32, "data_loader.batch_size": 8, "trainer.num_epochs": 1}
    directory = tmp_path / "qa"
    assert run(["train", str(CONFIG), "-s", str(directory), "-o", json.dumps(overrides)]) == 0
    metrics = json.loads((directory / "metrics.json").read_text())
    assert 0.0 <= metrics["best_validation_f1"] <= 1.0 and "best_validation_exact_match" in metrics
    assert (directory / "model.tar.gz").is_file()
