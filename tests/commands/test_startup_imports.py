"""Start-up: the command line imports only what the command needs.

`ipuflow --help` must not import torch or any heavy library, and loading ipuflow's components (what
`ipuflow train` does before reading a config) must not import the libraries that only some configs
use: torchmetrics (a metric imports it on its first batch), transformers and tokenizers (the
pretrained tokenizer and transformer model import them when built), ONNX and ONNX Runtime (export
and the onnxruntime executor). A whole short `ipuflow train` (training, validation, the test set,
the archive) and `ipuflow evaluate` of a config that uses none of them import none of them either.
Checked by module presence in a fresh interpreter, not by timing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from tests.experiment.conftest import tiny_config, write_tiny_data

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["torchmetrics", "transformers", "tokenizers", "onnx", "onnxruntime", "tensorboard", "scipy", "sklearn"]


def imported_after(code: str, watched: Optional[List[str]] = None) -> list:
    """Which of `watched` (default: the heavy libraries and torch) are imported after running `code`."""
    names = HEAVY + ["torch"] if watched is None else watched
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_main_module_and_help_import_nothing_heavy():
    assert imported_after("import ipuflow.__main__") == []
    assert imported_after("from ipuflow.commands.cli import run\ntry:\n    run(['--help'])\nexcept SystemExit:\n    pass") == []


def test_the_data_cache_commands_import_no_torch(tmp_path):
    """`ipuflow cache list|clean` read and remove files: importing the data package no longer builds
    its readers and loader (and torch with them, about 1.2 s of CPU)."""
    code = ("from ipuflow.commands.cli import run\n"
            f"assert run(['cache', 'list', '--cache-directory', {str(tmp_path)!r}]) == 0\n"
            f"assert run(['cache', 'clean', '--all', '--cache-directory', {str(tmp_path)!r}]) == 0")
    assert imported_after(code) == []


def test_the_data_package_still_exports_its_names_and_registers_on_use():
    """`from ipuflow.data import X` keeps working (imported when first used), for every name listed."""
    code = ("from ipuflow.data import *\n"
            "from ipuflow.data.columnar import *\n"
            "from ipuflow.data import ColumnarDataset, DatasetReader, Vocabulary, IGNORE_LABEL\n"
            "from ipuflow.data.columnar import cached_dataset\n"
            "import ipuflow.data as data\n"
            "assert data.TextClassificationJsonReader is DatasetReader.by_name('text_classification_json')\n"
            "assert Vocabulary.by_name('from_instances') is not None")
    assert imported_after(code) == ["torch"]


def test_loading_the_components_imports_no_optional_library():
    loaded = imported_after("from ipuflow.plugins import import_builtin_components\nimport_builtin_components()")
    assert loaded == ["torch"]


@pytest.mark.slow  # a training run in a fresh interpreter: about 10 s on 2 cores
def test_a_short_run_imports_no_library_its_config_does_not_use(tmp_path):
    """The quickstart-like config (a bag-of-embeddings classifier, accuracy) trains, validates,
    scores the test set, archives and is evaluated without torchmetrics, transformers, tokenizers,
    scipy, scikit-learn or ONNX. TensorBoard it uses: the trainer's default callbacks write its logs."""
    data = write_tiny_data(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(data, num_epochs=2)))
    run_dir = tmp_path / "run"
    commands = [["train", str(config), "-s", str(run_dir)], ["evaluate", str(run_dir), str(data / "test.jsonl")]]
    code = "from ipuflow.commands.cli import run\n" + "".join(f"assert run({args!r}) == 0\n" for args in commands)
    assert imported_after(code) == ["tensorboard", "torch"]
    assert json.loads((run_dir / "metrics.json").read_text())["test_accuracy"] >= 0.0


def test_a_model_built_on_the_meta_device_has_its_shapes_and_imports_no_compiler():
    """Initialisers called by torch.nn modules (keyword tensor) and tensor methods alike are skipped."""
    code = ("import torch\n"
            "from ipuflow.experiment.archive.meta_build import building_on_meta\n"
            "with building_on_meta():\n"
            "    model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 4), torch.nn.LSTM(4, 4))\n"
            "    loose = torch.empty(3, 3).normal_()\n"
            "    torch.nn.init.trunc_normal_(loose)\n"
            "assert all(p.is_meta for p in model.parameters()) and loose.is_meta\n"
            "assert tuple(model[1].weight.shape) == (4, 8) and tuple(model[2].weight_hh_l0.shape) == (16, 4)\n"
            "assert not torch.empty(2).is_meta  # only inside the block")
    assert imported_after(code, watched=["torch._dynamo"]) == []


@pytest.mark.slow  # trains a tiny model first: a few seconds
def test_predict_does_not_import_the_compiler(tmp_path):
    """Checking an archive's model sizes on the meta device skips the random initialisation, whose
    meta implementation in torch imports torch._dynamo (0.9 s of CPU, the largest part of a
    one-sentence predict's start-up)."""
    from ipuflow.commands.cli import run

    data = write_tiny_data(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny_config(data, num_epochs=1)))
    assert run(["train", str(config), "-s", str(tmp_path / "run")]) == 0
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"text": "a good film"}) + "\n")
    code = ("from ipuflow.commands.cli import run\n"
            f"assert run(['predict', {str(tmp_path / 'run' / 'model.tar.gz')!r}, {str(inputs)!r}, '--silent', "
            f"'--output-file', {str(tmp_path / 'out.jsonl')!r}]) == 0")
    assert "torch._dynamo" not in imported_after(code, watched=["torch._dynamo"])
    assert json.loads((tmp_path / "out.jsonl").read_text())["label"] in ("pos", "neg")
