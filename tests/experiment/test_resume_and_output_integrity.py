"""Wrong results never pass without a word (issue 22, items 9 and 11).

The probes: resuming a 2-process run with one process was accepted and trained to other weights
(2→3 and 1→2 were refused); NaN outputs made `predict` write bare `NaN`, which is not JSON; `-r`
after the training data changed resumed mid-epoch without a warning.
"""

from __future__ import annotations

import json
import shutil

import torch
from safetensors.torch import load_file, save_file

from ipuflow.commands.cli import run
from ipuflow.storage import file_sha256

from tests.experiment.conftest import tiny_config, write_tiny_data


def outcome(capsys, command):
    capsys.readouterr()
    code = run(command)
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def stopped_run(tmp_path, capsys):
    """A one-process run stopped by max_steps in its first epoch, and the config that continues it."""
    (tmp_path / "data").mkdir()
    data = write_tiny_data(tmp_path / "data")
    config = tiny_config(data, max_steps=3)
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps(config))
    config["trainer"]["max_steps"] = 6
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps(config))
    directory = tmp_path / "run"
    code, _, err = outcome(capsys, ["train", str(stopped), "-s", str(directory)])
    assert code == 0, err
    return directory, longer, data


def test_resuming_with_fewer_processes_than_wrote_the_checkpoint_is_refused(tmp_path, capsys):
    directory, longer, _ = stopped_run(tmp_path, capsys)
    manifest_path = max(directory.glob("checkpoint_e*_b*.json"))
    manifest = json.loads(manifest_path.read_text())
    state_name = next(name for name in manifest["sha256"] if name.startswith("training_state"))
    state = torch.load(directory / state_name, weights_only=True)
    part = {"rng": state.get("rng"), "model_metrics": state.get("model_metrics"), "callbacks": state.get("callbacks"),
            "executor_rng": (state.get("executor") or {}).get("rng")}
    state["ranks"] = [part, part]  # as rank 0 of a 2-process torchrun run writes it
    torch.save(state, directory / state_name)
    manifest["sha256"][state_name] = file_sha256(directory / state_name)
    manifest_path.write_text(json.dumps(manifest))
    code, _, err = outcome(capsys, ["train", str(longer), "-s", str(directory), "-r"])
    assert code == 2 and "written by 2 processes (ranks), and this run has one process" in err, err
    assert "as many processes as it was started with" in err


def test_resuming_after_the_training_data_changed_warns(tmp_path, capsys):
    directory, longer, data = stopped_run(tmp_path, capsys)
    assert json.loads((directory / "training_data.json").read_text())["train_data_path"]["size"] > 0
    lines = (data / "train.jsonl").read_text().splitlines()
    (data / "train.jsonl").write_text("\n".join(reversed(lines)) + "\n")  # same size, other order
    code, _, err = outcome(capsys, ["train", str(longer), "-s", str(directory), "-r"])
    assert code == 0, err
    assert "The training data changed since the run" in err and "train.jsonl" in err and "other content" in err, err


def test_resuming_with_the_same_data_says_nothing_of_it(tmp_path, capsys):
    directory, longer, data = stopped_run(tmp_path, capsys)
    (data / "train.jsonl").touch()  # a new modification time, the same content
    code, _, err = outcome(capsys, ["train", str(longer), "-s", str(directory), "-r"])
    assert code == 0 and "training data changed" not in err, err


def strict_json(line: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(line, parse_constant=refuse)


def test_predict_writes_nan_outputs_as_null_json(trained_run, tmp_path, capsys):
    poisoned = tmp_path / "poisoned"
    shutil.copytree(trained_run, poisoned)
    (poisoned / "model.tar.gz").unlink()
    weights = load_file(poisoned / "best.safetensors")
    for name in weights:
        weights[name] = torch.full_like(weights[name], float("nan"))
    save_file(weights, poisoned / "best.safetensors")
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"text": "a good film"}\n{"text": "a dull plot"}\n')
    output = tmp_path / "predictions.jsonl"
    code, out, err = outcome(capsys, ["predict", str(poisoned), str(inputs), "--output-file", str(output)])
    assert code == 0, err
    for text in (out, output.read_text()):
        rows = [strict_json(line) for line in text.splitlines()]
        assert len(rows) == 2 and "NaN" not in text
        assert rows[0]["probs"] == {"neg": None, "pos": None}, rows
