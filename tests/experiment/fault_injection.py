"""Running `ipuflow` in a child process with a fault injected at an exact point: a patch (Python
source run before the command) wraps a real function so that it kills the process, signals it or
raises inside it. The patch sees `os`, `signal` and `inject(module, name, before=None, after=None)`,
which wraps `module.name` to call `before(*args)` / `after(*args)` around the original."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[2]

_DRIVER = '''
import importlib, os, signal, sys
sys.path.insert(0, {root!r})

def inject(module, name, before=None, after=None):
    module = importlib.import_module(module)
    original = getattr(module, name)
    def wrapped(*args, **kwargs):
        if before is not None:
            before(*args, **kwargs)
        result = original(*args, **kwargs)
        if after is not None:
            after(*args, **kwargs)
        return result
    setattr(module, name, wrapped)

def kill_now(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

{patch}

from ipuflow.commands.cli import run
sys.exit(run(sys.argv[1:]))
'''


def run_with_fault(args: List[str], patch: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`ipuflow ARGS` in a child process after running `patch`; its exit code, stdout and stderr."""
    driver = _DRIVER.format(root=str(ROOT), patch=textwrap.dedent(patch))
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "IPUFLOW_FILE_FRIENDLY_LOGGING": "1"}
    return subprocess.run([sys.executable, "-c", driver, *args], capture_output=True, text=True, timeout=timeout,
                          env=environment, cwd=str(ROOT))
