"""`ipuflow evaluate` and `ipuflow predict` on a trained archive."""

import io
import json
import sys
import textwrap

import pytest
import torch

from ipuflow.experiment.archive.archival import load_archive
from ipuflow.commands.cli import run

from tests.experiment.conftest import make_examples, write_jsonl


def hand_metrics(run_dir, path):
    """Accuracy and mean loss computed directly with the archived model, one instance at a time."""
    archive = load_archive(run_dir)
    correct, losses = 0, []
    for instance in archive.dataset_reader.read(path):
        indexed = instance.index(archive.vocab)
        batch = {
            "tokens": torch.tensor([indexed["tokens"]]),
            "tokens_mask": torch.ones(1, len(indexed["tokens"]), dtype=torch.bool),
            "label": torch.tensor([indexed["label"]]),
        }
        with torch.no_grad():
            outputs = archive.model(**batch)
        correct += int(outputs["logits"].argmax(-1).item() == indexed["label"])
        losses.append(float(outputs["loss"]))
    return correct / len(losses), sum(losses) / len(losses)


def test_evaluate_matches_a_hand_computation_on_directory_and_tarball(trained_run, tiny_data, tmp_path, capsys):
    test_path = str(tiny_data / "test.jsonl")
    out_dir, out_tar = tmp_path / "dir.json", tmp_path / "tar.json"
    assert run(["evaluate", str(trained_run), test_path, "--output-file", str(out_dir)]) == 0
    assert run(["evaluate", str(trained_run / "model.tar.gz"), test_path, "--output-file", str(out_tar),
                "--batch-size", "3"]) == 0
    # Four device iterations of micro-batches of 2: the last call holds 2 real rows and 3 micro-batches
    # of pure padding, which must not dilute the mean loss.
    out_di = tmp_path / "di.json"
    assert run(["evaluate", str(trained_run), test_path, "--output-file", str(out_di), "--batch-size", "2",
                "-o", '{"trainer.executor": {"type": "native", "device_iterations": 4}}']) == 0
    accuracy, loss = hand_metrics(trained_run, test_path)
    for metrics in (json.loads(out_dir.read_text()), json.loads(out_tar.read_text()), json.loads(out_di.read_text())):
        assert metrics["accuracy"] == pytest.approx(accuracy)
        assert metrics["loss"] == pytest.approx(loss, rel=1e-5)


def test_evaluate_several_inputs_prefixes_keys_and_writes_predictions(trained_run, tiny_data, tmp_path, capsys):
    predictions = tmp_path / "predictions.jsonl"
    paths = f"{tiny_data / 'test.jsonl'},{tiny_data / 'validation.jsonl'}"
    assert run(["evaluate", str(trained_run), paths, "--predictions-output-file", str(predictions)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert {"test_accuracy", "validation_accuracy", "test_loss", "validation_loss"} <= set(metrics)
    lines = predictions.read_text().splitlines()
    assert len(lines) == 10 + 18
    assert "label" in json.loads(lines[0])


def direct_labels(run_dir, texts):
    archive = load_archive(run_dir)
    labels = []
    for text in texts:
        indexed = archive.dataset_reader.instance_from_json({"text": text}).index(archive.vocab)
        batch = {"tokens": torch.tensor([indexed["tokens"]]),
                 "tokens_mask": torch.ones(1, len(indexed["tokens"]), dtype=torch.bool)}
        with torch.no_grad():
            index = int(archive.model(**batch)["logits"].argmax(-1))
        labels.append(archive.vocab.get_token_from_index(index, "labels"))
    return labels


def test_predict_gives_n_outputs_for_n_inputs_in_order(trained_run, tmp_path):
    texts = [row["text"] for row in make_examples(7, seed=5)]
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in texts])
    with open(inputs, "a") as handle:
        handle.write("\n   \n")  # blank lines are skipped
    output = tmp_path / "out.jsonl"
    assert run(["predict", str(trained_run / "model.tar.gz"), str(inputs), "--output-file", str(output),
                "--batch-size", "4", "--silent"]) == 0
    predictions = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(predictions) == 7
    assert [p["label"] for p in predictions] == direct_labels(trained_run, texts)
    first = predictions[0]
    assert set(first["probs"]) == {"pos", "neg"} and sum(first["probs"].values()) == pytest.approx(1, abs=1e-5)
    assert first["top_k"][0][0] == first["label"]


def test_predict_reads_stdin(trained_run, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "a superb film"}\n{"text": "an awful plot"}\n'))
    assert run(["predict", str(trained_run), "-"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [line["label"] for line in lines] == direct_labels(trained_run, ["a superb film", "an awful plot"])


def test_a_malformed_line_stops_after_writing_the_earlier_outputs(trained_run, tmp_path, capsys):
    inputs = tmp_path / "bad.jsonl"
    inputs.write_text('{"text": "good"}\n{"text": "bad"}\n{"text": oops}\n{"text": "fine"}\n')
    output = tmp_path / "out.jsonl"
    assert run(["predict", str(trained_run), str(inputs), "--output-file", str(output), "--silent"]) == 1
    assert "input line 3" in capsys.readouterr().err
    assert len(output.read_text().splitlines()) == 2
    assert run(["predict", str(trained_run), str(inputs), "--output-file", str(output), "--silent",
                "--skip-bad-lines"]) == 0
    assert len(output.read_text().splitlines()) == 3


def test_a_custom_predictor_from_an_included_package(trained_run, tmp_path, monkeypatch, capsys):
    package = tmp_path / "my_predictors"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent('''
        from ipuflow.predictors import Predictor

        @Predictor.register("shouting_for_test")
        class Shouting(Predictor):
            def __init__(self, model, dataset_reader, suffix: str = "!") -> None:
                super().__init__(model, dataset_reader)
                self.suffix = suffix

            def to_json(self, outputs, inputs):
                return {"text": inputs["text"].upper() + self.suffix, "label": outputs["label"]}
    '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "quiet please"}\n'))
    assert run(["predict", str(trained_run), "-", "--include-package", "my_predictors",
                "--predictor", "shouting_for_test", "--predictor-args", '{"suffix": "?!"}']) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["text"] == "QUIET PLEASE?!"


def test_predict_with_a_missing_archive_or_input_is_a_clear_error(trained_run, tmp_path, capsys):
    assert run(["predict", str(tmp_path / "nope.tar.gz"), "-"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert run(["predict", str(trained_run), str(tmp_path / "missing.jsonl")]) == 2


def test_evaluate_with_a_postprocessor_scores_documents_from_their_windows(trained_run, tmp_path, capsys):
    windows = [
        {"doc": "d1", "text": "the film was superb", "label": "pos"},
        {"doc": "d1", "text": "a plot and very dull", "label": "pos"},
        {"doc": "d1", "text": "lovely movie", "label": "pos"},
        {"doc": "d2", "text": "awful and tedious", "label": "neg"},
        {"doc": "d2", "text": "the plot was fine", "label": "neg"},
        {"doc": "d3", "text": "witty film", "label": "neg"},
    ]
    path = write_jsonl(tmp_path / "windows.jsonl", windows)
    overrides = '{"dataset_reader.id_key": "doc", "postprocessor": {"type": "grouped_vote"}}'
    predictions_path = tmp_path / "documents.jsonl"
    assert run(["evaluate", str(trained_run), str(path), "-o", overrides,
                "--predictions-output-file", str(predictions_path)]) == 0
    metrics = json.loads(capsys.readouterr().out)

    archive = load_archive(trained_run)
    mean_probs = {}
    for window in windows:
        indexed = archive.dataset_reader.instance_from_json(window).index(archive.vocab)
        batch = {"tokens": torch.tensor([indexed["tokens"]]),
                 "tokens_mask": torch.ones(1, len(indexed["tokens"]), dtype=torch.bool)}
        with torch.no_grad():
            probs = archive.model(**batch)["probs"][0]
        mean_probs.setdefault(window["doc"], []).append(probs)
    gold = {"d1": "pos", "d2": "neg", "d3": "neg"}
    right = sum(
        archive.vocab.get_token_from_index(int(torch.stack(probs).mean(0).argmax()), "labels") == gold[doc]
        for doc, probs in mean_probs.items()
    )
    assert metrics["grouped_accuracy"] == pytest.approx(right / 3)
    documents = [json.loads(line) for line in predictions_path.read_text().splitlines()]
    assert [document["id"] for document in documents] == ["d1", "d2", "d3"]
    assert [document["gold"] for document in documents] == ["pos", "neg", "neg"]


def instance_path_evaluation(run_dir, path):
    """Metrics and prediction lines as `evaluate` computed them before it read through the columnar
    path: every instance read, indexed and listed one by one."""
    from ipuflow.evaluation.evaluator import evaluate, split_rows
    from ipuflow.evaluation.inference import inference_executor_from_config, loader_from_config
    from ipuflow.predictors.predictor import to_jsonable

    archive = load_archive(run_dir)
    executor = inference_executor_from_config(archive.config, archive.model, None, None, None)
    instances = archive.validation_dataset_reader.read(path)
    loader = loader_from_config(archive.config, [instance.index(archive.vocab) for instance in instances])
    loader.set_batch_size_factor(executor.batch_size_factor)
    executor.compile_for(loader)
    outputs = []

    def collect(batch_outputs, batch):
        readable = archive.model.make_output_human_readable(dict(batch_outputs))
        outputs.extend(split_rows(readable, next(iter(batch.values())).shape[0]))

    with torch.no_grad():
        metrics = evaluate(archive.model, executor, loader, on_outputs=collect)
    return metrics, [json.dumps(to_jsonable(output)) + "\n" for output in outputs[: len(instances)]]


def test_evaluate_and_predict_read_the_shipped_data_in_batches_with_the_instance_paths_results(trained_run, tmp_path, monkeypatch, capsys):
    from pathlib import Path

    from ipuflow.data.readers import DatasetReader

    shipped = Path(__file__).resolve().parents[2] / "data" / "rotten_tomatoes" / "test.jsonl"
    rows = [json.loads(line) for line in shipped.read_text().splitlines()]
    path = write_jsonl(tmp_path / "rt_test.jsonl", [{"text": row["text"], "label": "pos" if row["label"] == "fresh" else "neg"} for row in rows])
    monkeypatch.setenv("IPUFLOW_DATA_CACHE_DIR", str(tmp_path / "cache"))
    expected_metrics, expected_lines = instance_path_evaluation(trained_run, path)

    def one_by_one(*args, **kwargs):
        raise AssertionError("read instance by instance")

    monkeypatch.setattr(DatasetReader, "read", one_by_one)
    predictions = tmp_path / "predictions.jsonl"
    assert run(["evaluate", str(trained_run), str(path), "--predictions-output-file", str(predictions)]) == 0
    assert json.loads(capsys.readouterr().out) == expected_metrics
    assert predictions.read_text().splitlines(keepends=True) == expected_lines
    assert len(list((tmp_path / "cache").glob("*/meta.json"))) == 1  # built once, into the data cache

    by_reader, by_lines = tmp_path / "by_reader.jsonl", tmp_path / "by_lines.jsonl"
    assert run(["predict", str(trained_run), str(path), "--use-dataset-reader", "--output-file", str(by_reader), "--silent"]) == 0
    assert run(["predict", str(trained_run), str(path), "--output-file", str(by_lines), "--silent"]) == 0
    assert by_reader.read_text() == by_lines.read_text() and len(by_reader.read_text().splitlines()) == len(rows)


def _strict_json(text):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_evaluate_writes_json_that_strict_readers_accept_when_a_metric_is_nan(trained_run, tiny_data, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    weights = load_file(str(trained_run / "best.safetensors"))
    broken = tmp_path / "nan.safetensors"
    save_file({name: torch.full_like(value, float("nan")) for name, value in weights.items()}, str(broken))
    output = tmp_path / "metrics.json"
    capsys.readouterr()
    assert run(["evaluate", str(trained_run), str(tiny_data / "test.jsonl"), "--weights-file", str(broken),
                "--output-file", str(output)]) == 0
    printed = capsys.readouterr().out
    for metrics in (_strict_json(output.read_text()), _strict_json(printed[printed.index("{"):printed.rindex("}") + 1])):
        assert metrics["loss"] is None  # NaN is written as null, as predict writes it
        assert metrics["accuracy"] == pytest.approx(metrics["accuracy"])
