"""Files ipuflow writes get the permissions the umask gives (as `open` does), not mkstemp's 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from ipuflow.storage import link_atomically, write_atomically, write_json_atomically
from ipuflow.training.checkpoints.checkpointer import save_weights


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_atomic_writes_respect_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_json_atomically(tmp_path / "metrics.json", {"a": 1})
        write_atomically(tmp_path / "weights.bin", lambda temp: Path(temp).write_bytes(b"x"))
        with open(tmp_path / "plain.txt", "w") as handle:  # what config.json gets
            handle.write("x")
        link_atomically(tmp_path / "weights.bin", tmp_path / "best.bin")
        save_weights({"w": torch.zeros(2)}, tmp_path / "model.safetensors")  # safetensors writes a private file
    finally:
        os.umask(previous)
    expected = 0o666 & ~umask
    for name in ("metrics.json", "weights.bin", "plain.txt", "best.bin", "model.safetensors"):
        assert _mode(tmp_path / name) == expected, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.bin", "metrics.json", "model.safetensors", "plain.txt", "weights.bin"]
