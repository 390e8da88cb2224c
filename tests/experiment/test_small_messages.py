"""Small messages that were wrong or opaque (issue 26.7): each names what it is about."""

import pytest

from ipuflow.commands.cli import run


def test_evaluate_on_an_empty_file_names_the_file(trained_run, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run(["evaluate", str(trained_run), str(empty)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert f"{empty} holds no instances" in message and "ColumnarDataset" not in message


def test_hugging_face_callback_argument_errors_keep_their_key_path(tiny_data, tmp_path, capsys):
    import json

    pytest.importorskip("transformers")
    from tests.experiment.conftest import tiny_config

    cases = [
        ({"callback": "transformers.EarlyStoppingCallback", "args": {"patience": 2}},
         "trainer.callbacks.1.args: transformers.EarlyStoppingCallback cannot be built"),
        ({"callback": "PrinterCallback", "training_args": {"metric_for_bst_model": "loss"}},
         "trainer.callbacks.1.training_args.metric_for_bst_model: not a field of transformers.TrainingArguments"),
        ({"callback": "transformers.TrainingArguments"},
         "trainer.callbacks.1.callback: 'transformers.TrainingArguments' names"),
    ]
    for index, (callback, expected) in enumerate(cases):
        config = tiny_config(tiny_data, num_epochs=1, callbacks=["track_epoch", {"type": "huggingface", **callback}])
        path = tmp_path / f"c{index}.json"
        path.write_text(json.dumps(config))
        assert run(["train", str(path), "-s", str(tmp_path / f"run{index}")]) == 2
        message = " ".join(capsys.readouterr().err.split())
        assert expected in message, message
