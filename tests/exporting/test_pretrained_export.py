"""`export-pretrained` for every model built on transformers (issue 35): each export loads back with
`from_pretrained` and gives the ipuflow model's outputs on the same input, and carries a model card;
a model without a transformers model inside says so and points to `ipuflow export`."""

import json

import pytest
import torch
import yaml

from ipuflow.commands.cli import run
from ipuflow.experiment.archive.archival import load_archive
from ipuflow.exporting.pretrained_export import EXPORT_MARKER

from tests.exporting.conftest import TINY_BERT, train
from tests.fixtures.squad_data import squad_document, write_squad

pytestmark = pytest.mark.slow  # each trains or exports

SENTENCES = ["the film was witty and superb", "a dull plot", "boring"]


def _error(capsys):
    return " ".join(capsys.readouterr().err.split())


def _export(archive, target):
    assert run(["export-pretrained", str(archive), str(target)]) == 0
    return target


def _card(target):
    """The model card's YAML front matter (a dict) and its Markdown body."""
    text = (target / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front, body = text[len("---\n"):].split("\n---\n", 1)
    return yaml.safe_load(front), body


@pytest.mark.parametrize("run_fixture", ["pretrained_run", "transformer_classifier_run"])
def test_a_sentence_classifier_reloads_as_auto_model_for_sequence_classification_with_the_same_logits(
        run_fixture, request, tmp_path):
    import transformers

    directory = request.getfixturevalue(run_fixture)
    target = _export(directory / "model.tar.gz", tmp_path / "exported")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(target)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(target))
    archive = load_archive(directory / "model.tar.gz")
    assert model.config.id2label == archive.vocab.get_index_to_token_vocabulary("labels")
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits
        ours = archive.model(tokens=encoded["input_ids"], tokens_mask=encoded["attention_mask"].bool())["logits"]
    torch.testing.assert_close(theirs, ours, rtol=0, atol=0)


def _labels(target_ids, pad_id):
    """The targets ipuflow's seq2seq loss scores: the target's pieces after its leading [CLS] (the
    decoder's start token, which the decoder is fed), padding as -100."""
    labels = target_ids[:, 1:]
    return labels.masked_fill(labels == pad_id, -100)


def test_a_seq2seq_model_reloads_with_its_tokenizer_and_generation_config_and_generates_the_same(seq2seq_run, tmp_path):
    import transformers

    directory, rows = seq2seq_run
    target = _export(directory / "model.tar.gz", tmp_path / "exported")
    archive = load_archive(directory / "model.tar.gz")
    is_encoder_decoder = type(archive.model.transformer).__name__ == "EncoderDecoderModel"
    auto_class = transformers.EncoderDecoderModel if is_encoder_decoder else transformers.AutoModelForSeq2SeqLM
    model = auto_class.from_pretrained(str(target)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(target))
    generation = transformers.GenerationConfig.from_pretrained(str(target))
    assert (generation.num_beams, generation.max_new_tokens) == (archive.model.num_beams, 6)
    sources = tokenizer([row["source"] for row in rows], padding=True, return_tensors="pt")
    targets = tokenizer([row["target"] for row in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        ours = archive.model(tokens=sources["input_ids"], tokens_mask=sources["attention_mask"].bool(),
                             target_tokens=targets["input_ids"], target_tokens_mask=targets["attention_mask"].bool())
        # The exported generation config alone makes generate() do what ipuflow's evaluation does.
        generated = model.generate(input_ids=sources["input_ids"], attention_mask=sources["attention_mask"])
        loss = model(input_ids=sources["input_ids"], attention_mask=sources["attention_mask"],
                     labels=_labels(targets["input_ids"], tokenizer.pad_token_id)).loss
    width = ours["generated"].shape[1]
    padded = generated.new_full((generated.shape[0], width), tokenizer.pad_token_id)
    padded[:, :min(width, generated.shape[1])] = generated[:, :width]
    assert torch.equal(padded, ours["generated"])
    torch.testing.assert_close(loss, ours["loss"])


def test_the_model_card_holds_the_runs_metrics_config_data_and_training_time(pretrained_run, tmp_path, capsys):
    target = _export(pretrained_run, tmp_path / "exported")
    assert "AutoModelForSequenceClassification.from_pretrained" in capsys.readouterr().out
    metrics = json.loads((pretrained_run / "metrics.json").read_text())
    config = json.loads((pretrained_run / "config.json").read_text())
    front, body = _card(target)
    assert front["library_name"] == "transformers" and front["pipeline_tag"] == "text-classification"
    assert {"ipuflow", "text-classification"} <= set(front["tags"])
    [result] = front["model-index"][0]["results"]
    assert result["task"]["type"] == "text-classification"
    assert result["dataset"] == {"name": config["validation_data_path"], "type": "text_classification_json"}
    reported = {metric["type"]: metric["value"] for metric in result["metrics"]}
    assert reported == {"accuracy": metrics["best_validation_accuracy"], "loss": metrics["best_validation_loss"]}
    assert f"- training time: {metrics['training_duration']}" in body and "- epochs: 1" in body
    assert "AutoModelForSequenceClassification.from_pretrained" in body
    assert config["train_data_path"] in body and config["validation_data_path"] in body
    assert f"| best_validation_accuracy | {metrics['best_validation_accuracy']} |" in body
    assert json.loads(body.split("```json\n", 1)[1].split("\n```", 1)[0]) == config
    marker = json.loads((target / EXPORT_MARKER).read_text())
    assert "README.md" in marker["files"]


def test_the_model_card_of_other_weights_says_the_metrics_are_the_runs(pretrained_run, tmp_path):
    weights = pretrained_run / "best.safetensors"
    target = tmp_path / "exported"
    assert run(["export-pretrained", str(pretrained_run), str(target), "--weights-file", str(weights)]) == 0
    _, body = _card(target)
    assert f"These weights come from `{weights}` (`--weights-file`); the metrics below are the run's" in body


def test_the_model_card_of_an_archive_away_from_its_run_says_its_metrics_are_unknown(pretrained_run, tmp_path):
    archive = tmp_path / "elsewhere" / "model.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes((pretrained_run / "model.tar.gz").read_bytes())
    front, body = _card(_export(archive, tmp_path / "exported"))
    assert "model-index" not in front and "no metrics.json" in body


def _qa_run(root, model):
    """A finished one-epoch run of `model` on a small SQuAD-format task."""
    from tests.experiment.test_extractive_qa import qa_config

    write_squad(root / "train.json", squad_document(16, seed=0, sentences=6, unanswerable_every=4))
    write_squad(root / "validation.json", squad_document(8, seed=1, sentences=6, unanswerable_every=4, prefix="v"))
    config = qa_config(root)
    config["model"] = model
    config["trainer"]["num_epochs"] = 1
    return train(config, root)


@pytest.fixture(scope="module")
def span_extractor_run(tmp_path_factory):
    """The LSTM `span_extractor` (extractive QA without transformers)."""
    model = {"type": "span_extractor", "num_embeddings": 30522, "embedding_dim": 32, "hidden_size": 32}
    return _qa_run(tmp_path_factory.mktemp("span_extractor"), model)


def test_a_question_answering_model_reloads_as_auto_model_for_question_answering_with_the_same_logits(tmp_path):
    import transformers

    model = {"type": "huggingface", "task": "question_answering", "config": TINY_BERT}
    (tmp_path / "qa").mkdir()
    directory = _qa_run(tmp_path / "qa", model)
    target = _export(directory / "model.tar.gz", tmp_path / "exported")
    reloaded = transformers.AutoModelForQuestionAnswering.from_pretrained(str(target)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(target))
    archive = load_archive(directory / "model.tar.gz")
    encoded = tokenizer(["What is the code?", "Where is the bridge?"],
                        ["The secret code is amber.", "The river runs past the old mill and the stone bridge."],
                        padding=True, return_tensors="pt")
    mask = encoded["attention_mask"].bool()
    with torch.no_grad():
        theirs = reloaded(**encoded)
        ours = archive.model(tokens=encoded["input_ids"], tokens_mask=mask, type_ids=encoded["token_type_ids"])
    for name in ("start_logits", "end_logits"):  # ipuflow masks padding positions; the rest are equal
        torch.testing.assert_close(getattr(theirs, name)[mask], ours[name][mask], rtol=0, atol=0)


@pytest.mark.parametrize("run_fixture, model_type", [("trained_run", "basic_classifier"),
                                                      ("span_extractor_run", "span_extractor")])
def test_a_model_without_transformers_says_so_and_ipuflow_export_writes_it_as_onnx(run_fixture, model_type, request,
                                                                                   tmp_path, capsys):
    directory = request.getfixturevalue(run_fixture)
    assert run(["export-pretrained", str(directory), str(tmp_path / "exported")]) == 2
    error = _error(capsys)
    assert f"a {model_type} model" in error and "no transformers model" in error and "Traceback" not in error
    assert "ipuflow export" in error and "-o model.onnx" in error
    assert not (tmp_path / "exported").exists()
    assert run(["export", str(directory), "-o", str(tmp_path / "model.onnx")]) == 0


def test_ipuflow_export_refuses_a_generating_seq2seq_model_and_names_export_pretrained(seq2seq_run, tmp_path, capsys):
    directory, _ = seq2seq_run
    assert run(["export", str(directory), "-o", str(tmp_path / "model.onnx")]) == 2
    error = _error(capsys)
    assert error.startswith("ipuflow: error: model.generate:") and "export-pretrained" in error
    assert "Traceback" not in error and list(tmp_path.iterdir()) == []
