"""Under torchrun the windows of one document sit on different ranks: the post-processed validation
and test metrics equal one process's (`replication_factor: 2`), so they pick the same best epoch."""

from __future__ import annotations

import json
import math

import pytest

from tests.distributed.conftest import read_json, single_process, torchrun
from tests.experiment.conftest import write_jsonl
from tests.experiment.test_postprocessed_validation import windowed_config, windowed_documents


@pytest.mark.slow
def test_two_processes_post_process_validation_as_one_process_does(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", windowed_documents(24, 2, seed=0))
    # 13 documents of 3 windows: 39 rows, a partial last combined batch of padding split across ranks.
    write_jsonl(tmp_path / "validation.jsonl", windowed_documents(13, 3, seed=1))
    write_jsonl(tmp_path / "test.jsonl", windowed_documents(7, 3, seed=2))
    config = windowed_config(tmp_path, batch_size=2, num_epochs=3,
                             executor={"device": "cpu", "replication_factor": 2})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    one, two = tmp_path / "one", tmp_path / "two"
    assert single_process(["train", str(path), "-s", str(one)]) == 0
    done, _ = torchrun(["train", str(path), "-s", str(two)])
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = read_json(one / "metrics.json"), read_json(two / "metrics.json")
    for key in ("best_epoch", "best_validation_grouped_accuracy", "validation_grouped_accuracy", "test_grouped_accuracy"):
        assert math.isclose(first[key], second[key], rel_tol=1e-9), (key, first[key], second[key])
    for epoch in range(3):
        assert (read_json(one / f"metrics_epoch_{epoch}.json")["validation_grouped_accuracy"]
                == read_json(two / f"metrics_epoch_{epoch}.json")["validation_grouped_accuracy"])
