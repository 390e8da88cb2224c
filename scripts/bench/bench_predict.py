"""Prediction throughput: `ipuflow predict`'s machinery against a hand-written inference loop.

Both sides run in this process on the same archive and inputs, side by side, several repetitions:

* ipuflow: JSON lines in → parse, tokenize, index, fixed-shape batches, inference executor,
  human-readable outputs → JSON lines out (what `ipuflow predict` does after start-up);
* hand loop: the same inputs already tokenized and indexed into padded tensors, then
  `torch.inference_mode()` forward, softmax, argmax and the same JSON lines out.

Process start-up (`ipuflow predict` on a one-line input, end to end) is timed separately.

Usage: python scripts/bench/bench_predict.py [--archive runs/quickstart/model.tar.gz] [--repeats 5]
(train the quickstart first: bash scripts/quickstart.sh). Goal: ratio ≥ 0.95.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, List

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ipuflow.experiment.archive.archival import load_archive  # noqa: E402
from ipuflow.plugins import import_builtin_components  # noqa: E402
from ipuflow.evaluation.inference import inference_executor_from_config, micro_batch_size_from_config  # noqa: E402
from ipuflow.predictors.batch_prediction import BatchPredictor, predict_lines  # noqa: E402
from ipuflow.predictors.predictor import Predictor  # noqa: E402


def hand_loop(model: Any, batches: List[torch.Tensor], masks: List[torch.Tensor], counts: List[int],
              labels: List[str]) -> List[str]:
    """Forward each pre-built batch under inference mode and format the same JSON lines."""
    lines = []
    with torch.inference_mode():
        for tokens, mask, count in zip(batches, masks, counts):
            probs = model(tokens=tokens, tokens_mask=mask)["logits"].softmax(-1)[:count].tolist()
            for row in probs:
                best = max(range(len(row)), key=row.__getitem__)
                ranked = sorted(zip(labels, row), key=lambda pair: pair[1], reverse=True)
                lines.append(json.dumps({"label": labels[best], "probs": dict(zip(labels, row)),
                                         "top_k": [[name, p] for name, p in ranked[:3]]}))
    return lines


def main() -> None:
    """Print medians of both sides, their ratio, and the start-up time."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", default=str(ROOT / "runs/quickstart/model.tar.gz"))
    parser.add_argument("--input", default=str(ROOT / "data/rotten_tomatoes/test.jsonl"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copies", type=int, default=4, help="how many times the input file is repeated")
    args = parser.parse_args()
    if not Path(args.archive).exists():
        raise SystemExit(f"{args.archive} not found: train the quickstart first (bash scripts/quickstart.sh)")
    torch.set_num_threads(torch.get_num_threads())
    import_builtin_components()

    lines = [json.dumps({"text": json.loads(line)["text"]}) for line in Path(args.input).read_text().splitlines() if line.strip()]
    lines = lines * args.copies
    archive = load_archive(args.archive)
    model, config = archive.model, archive.config
    predictor = Predictor.from_params({"type": model.default_predictor}, model=model,
                                      dataset_reader=archive.validation_dataset_reader)
    executor = inference_executor_from_config(config, model, "cpu")
    runner = BatchPredictor(predictor, executor, config, archive.vocab)

    # The hand loop's inputs: tokenized, indexed and padded once, outside the timing.
    micro = micro_batch_size_from_config(config)
    max_length = (config.get("data_loader") or {}).get("max_length") or 64
    indexed = [archive.validation_dataset_reader.instance_from_json(json.loads(line)).index(archive.vocab)["tokens"]
               for line in lines]
    batches, masks, counts = [], [], []
    for start in range(0, len(indexed), micro):
        chunk = indexed[start:start + micro]
        tokens = torch.zeros(micro, max_length, dtype=torch.long)
        for row, ids in enumerate(chunk):
            ids = ids[:max_length]
            tokens[row, :len(ids)] = torch.tensor(ids)
        batches.append(tokens)
        masks.append(tokens != 0)
        counts.append(len(chunk))
    index_to_label = archive.vocab.get_index_to_token_vocabulary("labels")
    labels = [index_to_label[i] for i in range(len(index_to_label))]

    ours, hand = [], []
    for _ in range(args.repeats):
        written: List[str] = []
        started = time.perf_counter()
        predict_lines(runner, iter(lines), lambda p: written.append(json.dumps(p)))
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        reference = hand_loop(model, batches, masks, counts, labels)
        hand.append(time.perf_counter() - started)
        assert len(written) == len(reference) == len(lines)
    ours_rate = len(lines) / statistics.median(ours)
    hand_rate = len(lines) / statistics.median(hand)
    print(f"inputs: {len(lines)}  micro-batch: {micro}  repeats: {args.repeats}  threads: {torch.get_num_threads()}")
    print(f"ipuflow predict (in process)  median {statistics.median(ours):.3f} s  {ours_rate:,.0f} inputs/s")
    print(f"hand-written inference loop   median {statistics.median(hand):.3f} s  {hand_rate:,.0f} inputs/s")
    print(f"ratio ipuflow/hand: {ours_rate / hand_rate:.3f}")

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as one:
        one.write(lines[0] + "\n")
    startups = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ipuflow", "predict", args.archive, one.name], check=True,
                       capture_output=True, cwd=ROOT)
        startups.append(time.perf_counter() - started)
    print(f"process start-up (ipuflow predict, one input, end to end): median {statistics.median(startups):.2f} s")


if __name__ == "__main__":
    main()
