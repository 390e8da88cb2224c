"""The worked plugin of docs/extending.md trains, evaluates and predicts through the real CLI, loaded
both ways a plugin can be: `--include-package` and the `ipuflow.plugins` entry point."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PLUGIN_DIR = ROOT / "examples" / "ipuflow_sentiment_plugin"
CONFIG = PLUGIN_DIR / "sentiment.jsonnet"
# A slice of the shipped data and two epochs: enough to check that every component runs.
SMALL = json.dumps({"dataset_reader.max_instances": 256, "trainer.num_epochs": 2})


def ipuflow(*args, path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(entry) for entry in path)}
    return subprocess.run([sys.executable, "-m", "ipuflow", *args], capture_output=True, text=True, cwd=ROOT, env=env)


def check_trained(run_dir):
    """The callback logged both epochs and the model's metrics reached the metrics file."""
    logged = [json.loads(line) for line in (run_dir / "epoch_log.jsonl").read_text().splitlines()]
    assert [entry["epoch"] for entry in logged] == [0, 1]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert 0.0 <= metrics["best_validation_balanced"] <= 1.0 and "best_validation_accuracy" in metrics
    assert (run_dir / "model.tar.gz").is_file()


def evaluated(run_dir, path, *extra):
    result = ipuflow("evaluate", str(run_dir / "model.tar.gz"), "data/rotten_tomatoes/test.jsonl", *extra, path=path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout[result.stdout.index("{"):])


@pytest.mark.slow
def test_the_plugin_trains_and_evaluates_with_include_package(tmp_path):
    path = [ROOT, PLUGIN_DIR]
    run_dir = tmp_path / "run"
    result = ipuflow("train", str(CONFIG), "-s", str(run_dir), "-o", SMALL, "--include-package", "sentiment_plugin", path=path)
    assert result.returncode == 0, result.stderr
    check_trained(run_dir)
    assert json.loads((run_dir / "meta.json").read_text())["include_packages"] == ["sentiment_plugin"]
    metrics = evaluated(run_dir, path, "--include-package", "sentiment_plugin")
    assert 0.0 <= metrics["balanced"] <= 1.0 and 0.0 <= metrics["accuracy"] <= 1.0
    # Without the plugin the archive's config names a type nobody registered: a config error.
    missing = ipuflow("evaluate", str(run_dir / "model.tar.gz"), "data/rotten_tomatoes/test.jsonl", path=[ROOT])
    assert missing.returncode == 2 and "mean_pool_classifier" in missing.stderr


@pytest.mark.slow
def test_the_plugin_trains_evaluates_and_predicts_through_its_entry_point(tmp_path):
    # What `pip install examples/ipuflow_sentiment_plugin` leaves behind, without touching the venv.
    site = tmp_path / "site"
    dist_info = site / "ipuflow_sentiment_plugin-0.1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: ipuflow-sentiment-plugin\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text("[ipuflow.plugins]\nsentiment_plugin = sentiment_plugin\n")
    path = [ROOT, PLUGIN_DIR, site]
    run_dir = tmp_path / "run"
    result = ipuflow("train", str(CONFIG), "-s", str(run_dir), "-o", SMALL, path=path)
    assert result.returncode == 0, result.stderr
    check_trained(run_dir)
    metrics = evaluated(run_dir, path)
    assert 0.0 <= metrics["balanced"] <= 1.0
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"text": "A warm, funny and moving film."}\n{"text": "Dull and far too long."}\n')
    predicted = ipuflow("predict", str(run_dir / "model.tar.gz"), str(inputs), path=path)
    assert predicted.returncode == 0, predicted.stderr
    lines = [json.loads(line) for line in predicted.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2 and all(line["label"] in ("fresh", "rotten") for line in lines)
    # The components are listed as the plugin's, with the trainer-injected argument marked.
    listed = ipuflow("components", "TrainerCallback", "epoch_log", path=path)
    assert listed.returncode == 0, listed.stderr
    assert "file_name" in listed.stdout and "injected by ipuflow (not config keys): serialization_dir" in listed.stdout
