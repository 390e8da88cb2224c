"""The label vocabulary comes from the training data (issue 31.8): a label that only validation or
test data has is an error naming the file and the instance, not silently a new class of the model;
`datasets_for_vocab_creation` admits other datasets' labels on purpose."""

import json

from ipuflow.commands.cli import run
from ipuflow.data.vocabulary import Vocabulary

from tests.experiment.conftest import make_examples, tiny_config, write_jsonl


def _data_with_a_label_only_in_validation(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", make_examples(16, seed=0))
    validation = make_examples(6, seed=1)
    validation[3]["label"] = "neutral"
    write_jsonl(tmp_path / "validation.jsonl", validation)
    write_jsonl(tmp_path / "test.jsonl", make_examples(4, seed=2))
    return tmp_path


def _train(tmp_path, capsys, **settings):
    config = {**tiny_config(tmp_path), **settings}
    config["trainer"]["num_epochs"] = 1
    (tmp_path / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    code = run(["train", str(tmp_path / "config.json"), "-s", str(tmp_path / "run")])
    return code, " ".join(capsys.readouterr().err.split())


def test_a_label_only_in_validation_is_an_error_naming_the_file_and_instance(tmp_path, capsys):
    data = _data_with_a_label_only_in_validation(tmp_path)
    code, error = _train(data, capsys)
    assert code == 2, error
    assert f"{data / 'validation.jsonl'}: instance 4" in error and "'neutral'" in error, error
    assert "datasets_for_vocab_creation" in error and "Traceback" not in error
    assert not (data / "run").exists()


def test_datasets_for_vocab_creation_admits_the_validation_labels(tmp_path, capsys):
    data = _data_with_a_label_only_in_validation(tmp_path)
    code, error = _train(data, capsys, datasets_for_vocab_creation=["train", "validation"])
    assert code == 0, error
    labels = Vocabulary.from_files(data / "run" / "vocabulary").get_token_to_index_vocabulary("labels")
    assert set(labels) == {"pos", "neg", "neutral"}


def test_the_tokens_of_every_dataset_still_count_by_default(tmp_path, capsys):
    data = _data_with_a_label_only_in_validation(tmp_path)
    write_jsonl(data / "validation.jsonl", make_examples(6, seed=1) + [{"text": "zyzzyva", "label": "pos"}])
    code, error = _train(data, capsys)
    assert code == 0, error
    tokens = Vocabulary.from_files(data / "run" / "vocabulary").get_token_to_index_vocabulary("tokens")
    assert "zyzzyva" in tokens  # as AllenNLP's default: every dataset read counts for padded namespaces


def test_evaluate_names_the_file_and_instance_of_a_label_the_model_never_saw(trained_run, tmp_path, capsys):
    """issue 36, point 10: training's error names the file and instance, evaluate's named neither."""
    data = tmp_path / "unseen.jsonl"
    data.write_text('{"text": "a fine film", "label": "pos"}\n{"text": "so so", "label": "neutral"}\n')
    assert run(["evaluate", str(trained_run), str(data)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert f"{data}: instance 2 has the label 'neutral', which the vocabulary's 'labels' namespace lacks" in message
    assert "'neg', 'pos'" in message and "trained on" in message
