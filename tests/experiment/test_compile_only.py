"""`ipuflow train --compile-only`: everything is built and compiled for every input shape; nothing is trained."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ipuflow.commands.cli import run
from ipuflow.execution import NativeExecutor
from tests.experiment.conftest import tiny_config
from tests.training.regression import LinearRegression, loaders

ROOT = Path(__file__).resolve().parents[2]

# The stand-in poptorch is put in sys.modules of the ipuflow process by this test-only launcher, which
# then runs ipuflow's own command line (nothing in ipuflow knows about the stand-in).
WITH_STAND_IN = (
    "import sys; from tests.execution import fake_poptorch; sys.modules['poptorch'] = fake_poptorch; "
    "from ipuflow.commands.cli import run; sys.exit(run(sys.argv[1:]))"
)


def _write_config(directory: Path, data_dir: Path, lengths: dict = {"length_buckets": [4, 8], "padding": "fixed"},
                  **trainer) -> Path:
    config = tiny_config(data_dir, **trainer)
    config["data_loader"] = {"batch_size": 4, "shuffle": True, **lengths}
    path = directory / "config.json"
    path.write_text(json.dumps(config))
    return path


def _report(out: str) -> dict:
    return json.loads(out)  # stdout is the JSON report alone, for `| jq`; the summary lines go to stderr


def _ipuflow(*args: str, stand_in: bool = False, cwd: Path = ROOT, ipus: int = 64) -> subprocess.CompletedProcess:
    """ipuflow ARGS in a subprocess; with `stand_in`, on a stand-in machine with `ipus` IPUs."""
    command = [sys.executable, "-c", WITH_STAND_IN] if stand_in else [sys.executable, "-m", "ipuflow"]
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "IPUFLOW_STAND_IN_IPUS": str(ipus)}
    return subprocess.run(command + list(args), capture_output=True, text=True, cwd=cwd, env=environment, timeout=600)


def test_compile_only_fixes_every_length_bucket_and_leaves_the_directory_for_a_later_run(tiny_data, tmp_path, capsys):
    config = _write_config(tmp_path, tiny_data, num_epochs=1)
    target = tmp_path / "run"
    assert run(["train", str(config), "-s", str(target), "--compile-only"]) == 0
    captured = capsys.readouterr()
    assert not target.exists()
    assert f"{target} was not touched" in captured.err
    report = _report(captured.out)
    assert report["backend"] == "native"
    by_loader = {entry["loader"]: entry for entry in report["compiled"]}
    assert set(by_loader) == {"training", "validation", "test"}
    assert by_loader["training"]["mode"] == "training" and by_loader["validation"]["mode"] == "inference"
    # One input shape per length bucket, all of them before any step.
    assert [shape["tokens"] for shape in by_loader["training"]["input_shapes"]] == [[4, 4], [4, 8]]
    assert "nothing to compile: executor.compile is false" in by_loader["training"]["compiled"]
    assert by_loader["training"]["padding"]["padding"] == "fixed"
    # The directory a compile-only run names is free for the real run.
    assert run(["train", str(config), "-s", str(target)]) == 0
    assert (target / "model.tar.gz").is_file()


def test_compile_only_on_the_eager_executor_reports_per_batch_padding(tiny_data, tmp_path, capsys):
    config = _write_config(tmp_path, tiny_data, {"length_buckets": [4, 8]}, num_epochs=1)
    assert run(["train", str(config), "-s", str(tmp_path / "run"), "--compile-only"]) == 0
    training = {entry["loader"]: entry for entry in _report(capsys.readouterr().out)["compiled"]}["training"]
    assert training["padding"] == {"padding": "longest", "configured": "auto", "pad_to_multiple_of": 1, "truncate_at": 8,
                                   "because": "the executor runs any sequence length"}
    assert len(training["input_shapes"]) == 1  # every length is taken: one sample fixes keys and dtypes


@pytest.mark.parametrize("flag", ["--dry-run", "--recover", "--force"])
def test_compile_only_refuses_flags_about_the_serialization_directory(tiny_config_file, tmp_path, flag, capsys):
    assert run(["train", str(tiny_config_file), "-s", str(tmp_path / "run"), "--compile-only", flag]) == 2
    assert f"--compile-only cannot be combined with {flag}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_native_compile_ahead_builds_forward_and_backward_graphs_and_trains_nothing():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = LinearRegression(dropout=0.2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    executor = NativeExecutor(model, optimizer, device="cpu", compile=True)
    train_loader, _ = loaders()
    weights = {key: value.clone() for key, value in model.state_dict().items()}
    rng = torch.get_rng_state()
    compiled_before = counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_hit"]

    said = executor.compile_ahead(train_loader)

    assert said == "torch.compile built the forward and backward graphs for 1 input shape(s)"
    # Inductor built two graphs (forward and the lazily compiled backward) ...
    assert counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_hit"] - compiled_before == 2
    # ... and nothing was trained: weights, gradients, optimizer state and the RNG are as they were.
    assert all(torch.equal(weights[key], value) for key, value in model.state_dict().items())
    assert all(parameter.grad is None for parameter in model.parameters())
    assert not optimizer.state and torch.equal(rng, torch.get_rng_state())
    # The first real call compiles nothing more.
    graphs = dict(counters["stats"])
    executor(next(iter(train_loader)))
    assert dict(counters["stats"]) == graphs


@pytest.mark.slow
def test_compile_only_cli_with_torch_compile_says_what_it_compiled(tiny_data, tmp_path):
    config = _write_config(tmp_path, tiny_data, executor={"compile": True})
    target = tmp_path / "run"
    done = _ipuflow("train", str(config), "-s", str(target), "--compile-only")
    assert done.returncode == 0, done.stderr
    assert not target.exists()
    by_loader = {entry["loader"]: entry for entry in _report(done.stdout)["compiled"]}
    assert by_loader["training"]["compiled"] == "torch.compile built the forward and backward graphs for 2 input shape(s)"
    assert by_loader["validation"]["compiled"] == "torch.compile built the forward graphs for 2 input shape(s)"
    assert "Compiled for the training loader (training, 2 input shape(s): tokens [4, 4]" in done.stderr


def test_compile_only_on_poptorch_fills_the_executable_cache(tiny_data, tmp_path):
    cache = tmp_path / "exe_cache"
    executor = {"type": "poptorch", "device_iterations": 2, "executable_cache_dir": str(cache)}
    config = _write_config(tmp_path, tiny_data, {"max_length": 8}, executor=executor)
    target = tmp_path / "run"
    done = _ipuflow("train", str(config), "-s", str(target), "--compile-only", stand_in=True)
    assert done.returncode == 0, done.stderr
    assert not target.exists()
    report = _report(done.stdout)
    assert report["backend"] == "poptorch"
    by_loader = {entry["loader"]: entry for entry in report["compiled"]}
    offline = "for an offline Mk2 IPU (ipu_version 2, no IPU attached)"
    assert by_loader["training"]["compiled"] == f"poptorch compiled the training executable {offline}, cached in {cache}"
    assert by_loader["validation"]["compiled"] == f"poptorch compiled the inference executable {offline}, cached in {cache}"
    # Training runs 2 device iterations of 4: one combined batch of 8; inference one micro-batch of 4.
    assert by_loader["training"]["input_shapes"] == [{"tokens": [8, 8], "tokens_mask": [8, 8], "label": [8]}]
    assert by_loader["validation"]["input_shapes"][0]["tokens"] == [8, 8]
    entries = sorted(path.read_text() for path in cache.glob("*.popef"))
    assert len(entries) == 2 and entries[0].startswith("(False") and entries[1].startswith("(True")


@pytest.mark.parametrize("version, name", [(2, "Mk2"), (21, "Bow")])
def test_compile_only_on_poptorch_compiles_for_an_offline_ipu_on_a_host_without_ipus(tiny_data, tmp_path, version, name):
    # Issue 34, point 3: optimum's compile_only sets useOfflineIpuTarget (ipu_configuration.py to_options);
    # without it, poptorch attaches at compile and a host without IPUs fails ("Failed to acquire 1 IPU(s)").
    executor = {"type": "poptorch", "offline_ipu_version": version}
    config = _write_config(tmp_path, tiny_data, {"max_length": 8}, executor=executor)
    done = _ipuflow("train", str(config), "-s", str(tmp_path / "run"), "--compile-only", stand_in=True, ipus=0)
    assert done.returncode == 0, done.stderr[-3000:]
    by_loader = {entry["loader"]: entry for entry in _report(done.stdout)["compiled"]}
    assert by_loader["training"]["compiled"] == (f"poptorch compiled the training executable for an offline {name} IPU "
                                                 f"(ipu_version {version}, no IPU attached) (executable_cache_dir is not "
                                                 "set: not cached)")
    assert set(by_loader) == {"training", "validation", "test"}


def test_training_on_a_host_without_ipus_still_fails_to_acquire_one(tiny_data, tmp_path):
    config = _write_config(tmp_path, tiny_data, {"max_length": 8}, executor={"type": "poptorch"})
    done = _ipuflow("train", str(config), "-s", str(tmp_path / "run"), stand_in=True, ipus=0)
    assert done.returncode == 1 and "Failed to acquire 1 IPU(s)" in done.stderr


def test_compile_only_without_poptorch_says_so_before_reading_any_data(tiny_data, tmp_path):
    # Issue 36, point 6: it read all the data (22 s on the NER config) before saying poptorch was missing.
    config = json.loads(_write_config(tmp_path, tiny_data, {"max_length": 8}, executor={"type": "poptorch"}).read_text())
    config["train_data_path"] = str(tmp_path / "missing.jsonl")  # reading any data would fail
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    done = _ipuflow("train", str(path), "-s", str(tmp_path / "run"), "--compile-only")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "trainer.executor.type: 'poptorch' needs the poptorch package" in done.stderr
    assert "missing.jsonl" not in done.stderr and "Traceback" not in done.stderr


def test_compile_only_on_poptorch_stops_on_length_buckets_as_training_would(tiny_data, tmp_path):
    config = _write_config(tmp_path, tiny_data, executor={"type": "poptorch"})
    done = _ipuflow("train", str(config), "-s", str(tmp_path / "run"), "--compile-only", stand_in=True)
    assert done.returncode == 1
    assert "one executable for one input signature" in done.stderr and "max_length" in done.stderr


def test_compile_only_with_an_optimum_ipu_config_fills_its_cache_in_the_working_directory(tiny_data, tmp_path):
    # Graphcore's own file (tests/fixtures/ipu_config/README.md): executable_cache_dir "./exe_cache".
    shutil.copy(ROOT / "tests" / "fixtures" / "ipu_config" / "t5_encoder_ipu_config.json", tmp_path / "ipu_config.json")
    config = _write_config(tmp_path, tiny_data, {"max_length": 8}, executor={"type": "poptorch", "ipu_config": "ipu_config.json"})
    done = _ipuflow("train", str(config), "-s", "run", "--compile-only", stand_in=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "poptorch compiled the training executable for an offline Mk2 IPU (ipu_version 2, no IPU attached), cached " \
           "in ./exe_cache" in done.stderr
    assert len(list((tmp_path / "exe_cache").glob("*.popef"))) == 2
    assert not (tmp_path / "run").exists()


def test_the_shipped_ipu_example_compiles_with_the_block_winning_over_its_ipu_config(tmp_path):
    cache = tmp_path / "exe_cache"
    done = _ipuflow("train", "configs/quickstart_ipu.jsonnet", "-s", str(tmp_path / "run"), "--compile-only",
                    "-o", json.dumps({"trainer.executor.executable_cache_dir": str(cache)}), stand_in=True)
    assert done.returncode == 0, done.stderr
    by_loader = {entry["loader"]: entry for entry in _report(done.stdout)["compiled"]}
    # configs/ipu_config.json: device_iterations 4 × gradient_accumulation_steps 2 × micro-batch 32.
    assert by_loader["training"]["input_shapes"][0]["label"] == [256]
    assert by_loader["validation"]["input_shapes"][0]["label"] == [128]
    assert len(list(cache.glob("*.popef"))) == 2
