"""Rank 0 speaks for the group: it alone writes the serialization directory and prints; the other
ranks follow its decisions and keep quiet unless they have an error of their own to report."""

from __future__ import annotations

import logging
import sys
from typing import Callable, TypeVar

from ipuflow.config import ConfigurationError
from ipuflow.distributed.collectives import broadcast_from_primary
from ipuflow.distributed.process_group import current, environment_rank, launched_by_torchrun

T = TypeVar("T")


class PrimaryFailed(RuntimeError):
    """Rank 0 failed at a step the other ranks were waiting for (rank 0 reports the error)."""


def on_primary(action: Callable[[], T]) -> T:
    """Run `action` on rank 0 only and give its result to every rank; an error on rank 0 is raised
    on every rank (a configuration error as one, so every rank exits with the same code)."""
    if current() is None:
        return action()
    outcome = None
    if current().is_primary:  # type: ignore[union-attr]
        try:
            outcome = ("ok", action())
        except ConfigurationError as error:
            broadcast_from_primary(("config", str(error)))
            raise
        except BaseException as error:
            broadcast_from_primary(("error", f"{type(error).__name__}: {error}"))
            raise
    kind, value = broadcast_from_primary(outcome)
    if kind == "config":
        raise ConfigurationError(value)
    if kind == "error":
        raise PrimaryFailed(f"rank 0 failed ({value})")
    return value


def reports_error(error: BaseException) -> bool:
    """Whether this process prints `error`: always in one process; under torchrun a configuration
    error (the same on every rank) and a failure caused by another rank are printed by rank 0 only,
    no rank prints a collective broken by another rank's exit (that rank reports its cause), and an
    error that rank 0 raised alike (compared through torchrun's store) is printed by rank 0 only."""
    if not launched_by_torchrun():
        return True
    if isinstance(error, PrimaryFailed) or is_peer_failure(error):
        return False
    if isinstance(error, ConfigurationError):
        return environment_rank() == 0
    from ipuflow.distributed.shared_errors import raised_alike_by_rank_0

    return not raised_alike_by_rank_0(f"{type(error).__name__}: {error}", environment_rank())


def is_peer_failure(error: BaseException) -> bool:
    """Whether `error` is a collective that failed because another rank went away."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return False
    if isinstance(error, getattr(dist, "DistNetworkError", ())) or isinstance(error, getattr(dist, "DistBackendError", ())):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        marker in text for marker in ("Connection closed by peer", "Connection reset by peer", "Broken pipe")
    )


def error_prefix() -> str:
    """``[rank N] `` under torchrun, so that an error names the rank that had it; empty otherwise."""
    return f"[rank {environment_rank()}] " if launched_by_torchrun() else ""


def quiet_other_ranks() -> None:
    """On ranks other than 0, log only warnings and errors, each line naming the rank."""
    context = current()
    if context is None or context.is_primary:
        return
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for handler in root.handlers:
        handler.setFormatter(logging.Formatter(f"%(asctime)s [rank {context.rank}] %(levelname)s %(name)s: %(message)s",
                                               "%H:%M:%S"))
    sys.stdout.flush()
