"""Where inference time goes, operator by operator: PyTorch against ONNX Runtime on one archive.

Both run the same fixed-shape batch of the archive's test data (its loader's micro-batch and
max_length) with the same number of threads. PyTorch is read with torch.profiler (self CPU time per
aten operator), ONNX Runtime with its own session profiler (kernel time per node, by operator
type). Each is reported in ms per batch, with the matrix products (aten::addmm/mm/bmm, fused
attention against MatMul/Gemm/FusedMatMul/Attention...) summed apart: when both runtimes spend most
of a batch in float matrix products at the same rate, no graph fusion can make one much faster.

Usage: python scripts/bench/onnx_operator_profile.py ARCHIVE [--onnx FILE] [--input DATA] [--threads 2] [--runs 5]
Without --onnx the archive is exported first (`ipuflow export`, fusions on where parity holds).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Mapping, Tuple

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ipuflow.evaluation.inference import loader_from_config  # noqa: E402
from ipuflow.execution.onnx_metadata import read_record  # noqa: E402
from ipuflow.execution.onnxruntime_executor import OnnxSession  # noqa: E402
from ipuflow.experiment.archive.archival import load_archive  # noqa: E402
from ipuflow.exporting.onnx_export import export_archive  # noqa: E402

MATRIX_PRODUCTS = {
    "pytorch": {"aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::baddbmm",
                "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math"},
    "onnxruntime": {"MatMul", "Gemm", "FusedMatMul", "FusedGemm", "Attention", "MultiHeadAttention", "MatMulInteger",
                    "DynamicQuantizeMatMul", "MatMulIntegerToFloat"},
}


def pytorch_operators(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], runs: int) -> Tuple[float, Dict[str, float]]:
    """(wall ms per batch unprofiled, self CPU ms per batch by aten operator)."""
    with torch.inference_mode():
        for _ in range(2):
            model(**batch)
        started = time.perf_counter()
        for _ in range(runs):
            model(**batch)
        wall = (time.perf_counter() - started) / runs * 1000
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(runs):
                model(**batch)
    return wall, {event.key: event.self_cpu_time_total / 1000 / runs for event in profile.key_averages()
                  if event.self_cpu_time_total > 0}


def onnxruntime_operators(onnx_file: str, batch: Mapping[str, torch.Tensor], threads: int, runs: int,
                          scratch: Path) -> Tuple[float, Dict[str, float]]:
    """(wall ms per batch unprofiled, kernel ms per batch by ONNX operator type)."""
    import onnxruntime  # type: ignore[import-untyped]

    record = read_record(onnx_file)
    plain = OnnxSession(onnx_file, record, intra_op_threads=threads)
    for _ in range(2):
        plain.run(batch)
    started = time.perf_counter()
    for _ in range(runs):
        plain.run(batch)
    wall = (time.perf_counter() - started) / runs * 1000
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    options.profile_file_prefix = str(scratch / "ort")
    profiled = onnxruntime.InferenceSession(onnx_file, sess_options=options, providers=["CPUExecutionProvider"])
    feeds = plain.feeds(batch)
    for _ in range(runs + 2):  # the first two are the warm-up, as above
        profiled.run(plain.output_names, feeds)
    events = json.loads(Path(profiled.end_profiling()).read_text())
    # The kernels of the timed runs only (the last `runs` model_run spans), not the warm-up's.
    spans = sorted((event["ts"], event["ts"] + event["dur"]) for event in events if event.get("name") == "model_run")[-runs:]
    by_type: Dict[str, float] = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and \
                any(start <= event["ts"] <= end for start, end in spans):
            by_type[event["args"]["op_name"]] += event["dur"] / 1000 / runs
    return wall, dict(by_type)


def report(name: str, wall: float, operators: Dict[str, float], top: int = 8) -> Dict[str, float]:
    total = sum(operators.values())
    products = sum(value for key, value in operators.items() if key in MATRIX_PRODUCTS[name])
    print(f"\n{name}: {wall:.1f} ms per batch (unprofiled); profiled operators {total:.1f} ms, "
          f"of which matrix products {products:.1f} ms ({100 * products / total:.0f}%)")
    for key, value in sorted(operators.items(), key=lambda item: -item[1])[:top]:
        print(f"  {key:52s} {value:8.2f} ms  {100 * value / total:5.1f}%")
    return {"wall_ms": round(wall, 2), "operators_ms": round(total, 2), "matrix_products_ms": round(products, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive")
    parser.add_argument("--onnx")
    parser.add_argument("--input", default=str(ROOT / "data/rotten_tomatoes/test.jsonl"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scratch = Path(tempfile.mkdtemp(prefix="operator-profile-"))
    onnx_file = args.onnx
    if onnx_file is None:
        onnx_file = str(scratch / "model.onnx")
        export_archive(args.archive, Path(onnx_file), input_path=args.input, samples=2)
    archive = load_archive(Path(args.archive))
    instances = [instance.index(archive.vocab) for instance in archive.validation_dataset_reader.read(args.input)]
    batch = {key: value for key, value in next(iter(loader_from_config(archive.config, instances))).items()}
    model = archive.model.eval()
    print("batch:", {key: list(value.shape) for key, value in batch.items()}, f"threads: {args.threads}")
    figures = {
        "pytorch": report("pytorch", *pytorch_operators(model, batch, args.runs)),
        "onnxruntime": report("onnxruntime", *onnxruntime_operators(onnx_file, batch, args.threads, args.runs, scratch)),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
