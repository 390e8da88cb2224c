"""One `ipuflow train`, `evaluate` and `predict` on each executor, native and the poptorch stand-in,
in real subprocesses: the end-to-end check the CI's torch 2.0.1 leg (poptorch 3.3/3.4's torch,
scripts/test_torch20.sh) runs beside the executor tests. The main suite, on the newest torch, skips it:
its own test_poptorch_cli.py covers the same commands at more length."""

from __future__ import annotations

import json

import pytest

from ipuflow.torch_features import torch_at_least
from tests.execution.test_poptorch_cli import OPTIMIZERS, ROOT, ipuflow, parity


@pytest.mark.slow
@pytest.mark.skipif(torch_at_least((2, 1)), reason="the torch 2.0.1 leg's end-to-end run; with a newer torch, "
                    "test_poptorch_cli.py trains, evaluates and predicts on both executors")
def test_train_evaluate_and_predict_on_native_and_on_the_poptorch_stand_in(tmp_path):
    parity("digits_mlp", tmp_path, {"trainer.num_epochs": 2, "trainer.optimizer": OPTIMIZERS["adam"]})
    lines = [json.loads(line) for line in (ROOT / "data/digits/test.jsonl").read_text().splitlines()[:16]]
    source = tmp_path / "inputs.jsonl"
    source.write_text("".join(json.dumps({key: value for key, value in line.items() if key != "label"}) + "\n" for line in lines))
    for executor in ("native", "poptorch"):
        run = tmp_path / executor
        on_this_executor = json.dumps({"trainer.executor.type": executor})
        scores = tmp_path / f"evaluate_{executor}.json"
        ipuflow("evaluate", str(run / "model.tar.gz"), "data/digits/test.jsonl", "--output-file", str(scores),
                "-o", on_this_executor, poptorch=executor == "poptorch")
        assert json.loads(scores.read_text())["accuracy"] > 0.85, executor
        # The archive names the executor it was trained on, so predict runs on that one.
        predicted = ipuflow("predict", str(run), str(source), poptorch=executor == "poptorch").stdout.strip().splitlines()
        assert len(predicted) == len(lines), executor
        labels = [json.loads(row)["label"] for row in predicted]
        assert sum(str(label) == str(line["label"]) for label, line in zip(labels, lines)) >= 12, executor
