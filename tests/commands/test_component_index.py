"""The static index of ipuflow's registered components: current, and what `ipuflow components` lists
without importing the components (and torch: about 1.5 s of CPU), exactly as the registry would."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python(code: str) -> subprocess.CompletedProcess:
    """`code` run in a fresh interpreter (no component registered by another test)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)


def test_the_committed_index_is_current():
    result = python("from ipuflow.commands.component_index import main; raise SystemExit(main(['--check']))")
    assert result.returncode == 0, result.stderr


LISTINGS = [[], ["model"], ["executor"], ["lr_scheduler"]]

LIST_BOTH_WAYS = f"""
import contextlib, io, json, sys
from ipuflow.commands.cli import run

def listed(args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["components", *args]) == 0
    return out.getvalue()

from_index = [listed(args) for args in {LISTINGS!r}]
torch_imported = "torch" in sys.modules
# An included package makes the command read the live registry (here one that registers nothing).
from_registry = [listed([*args, "--include-package", "ipuflow.version"]) for args in {LISTINGS!r}]
print(json.dumps([torch_imported, from_index, from_registry]))
"""


def test_listing_reads_the_index_imports_no_component_and_matches_the_registry():
    import json

    result = python(LIST_BOTH_WAYS)
    assert result.returncode == 0, result.stderr
    torch_imported, from_index, from_registry = json.loads(result.stdout.strip().splitlines()[-1])
    assert not torch_imported
    assert from_index == from_registry
    assert "Model: " in from_index[1] and "  basic_classifier: " in from_index[1]
    assert "  native (default): " in from_index[2]
