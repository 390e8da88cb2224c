"""Whether `--debug` (or IPUFLOW_DEBUG=1) asked for details: tracebacks, transformers' loading report."""

from __future__ import annotations

import os

_state = {"enabled": os.environ.get("IPUFLOW_DEBUG", "") not in ("", "0")}


def enable_debug() -> None:
    """Turn details on for the rest of this process (the CLI's `--debug`)."""
    _state["enabled"] = True


def debug_enabled() -> bool:
    """Whether details were asked for, by `--debug` or by IPUFLOW_DEBUG=1 in the environment."""
    return _state["enabled"] or os.environ.get("IPUFLOW_DEBUG", "") not in ("", "0")
