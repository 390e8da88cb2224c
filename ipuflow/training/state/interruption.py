"""Errors that end training early on purpose, and the signal handling that raises one."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Callable, Dict, Optional, TypeVar


class TrainingInterrupted(RuntimeError):
    """SIGINT or SIGTERM stopped training after a checkpoint was saved; the message says how to resume.
    `signal_name` is the signal's (``"SIGINT"``)."""

    def __init__(self, message: str, signal_name: Optional[str] = None) -> None:
        super().__init__(message)
        self.signal_name = signal_name


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the last good checkpoint is kept."""


class _SignalHandlers:
    """While active, SIGINT and SIGTERM go to `_handle`; installed only from the main thread (the
    only one Python delivers signals to) and the previous handlers restored on exit."""

    def __init__(self) -> None:
        self._previous: Dict[int, Any] = {}

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        raise NotImplementedError

    def __enter__(self: _Handlers) -> _Handlers:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}


_Handlers = TypeVar("_Handlers", bound=_SignalHandlers)


class InterruptListener(_SignalHandlers):
    """While active, turns SIGINT/SIGTERM into a flag the training loop checks after each host call.

    A second signal while the first is being handled raises `KeyboardInterrupt` at once, so a stuck
    run can still be killed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.signal_name: Optional[str] = None

    @property
    def interrupted(self) -> bool:
        """Whether a signal arrived."""
        return self.signal_name is not None

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signal_name is not None:
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name


class StopOnSignal(_SignalHandlers):
    """For a whole command: SIGINT and SIGTERM raise `TrainingInterrupted` at once, with the message
    `describe(signal_name)` (which says where the command stopped and what `-r` will do).

    While training runs, the trainer's `InterruptListener` takes over (it finishes the host call
    and checkpoints first) and hands these handlers back afterwards.
    """

    def __init__(self, describe: Callable[[str], str]) -> None:
        super().__init__()
        self._describe = describe

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        name = signal.Signals(signum).name
        raise TrainingInterrupted(self._describe(name), name)


def non_finite_loss_error(in_a_row: int, epochs: int, updates: int, last_checkpoint: Optional[str]) -> NonFiniteLossError:
    """The error for `in_a_row` NaN or infinite training losses in a row, read at optimizer update `updates`."""
    kept = f"the last good checkpoint ({last_checkpoint}) is kept" if last_checkpoint else "no checkpoint was saved"
    return NonFiniteLossError(
        f"The training loss was NaN or infinite in the last {in_a_row} host calls in a row, in epoch {epochs} by "
        f"optimizer update {updates} (trainer.stop_after_nonfinite_losses); training stopped and {kept}. Lower the "
        "learning rate, clip gradients (trainer.grad_norm) or check the data."
    )


def resume_command(serialization_dir: Any) -> str:
    """The command, in backquotes, that continues the run in `serialization_dir`: it reads the run's
    own config.json (so the `-o` edits it was started with are kept) and includes the same packages."""
    import shlex

    from ipuflow.config.import_policy import included_packages

    packages = "".join(f" --include-package {shlex.quote(name)}" for name in included_packages())
    return f"`ipuflow train -s {shlex.quote(str(serialization_dir))} -r{packages}`"


def signal_as_training_ended(signal_name: str, status: str, serialization_dir: str) -> TrainingInterrupted:
    """The error for a signal that arrived as training ended (the stop is checkpointed already)."""
    return TrainingInterrupted(
        f"{signal_name} arrived as training ended ({status}); the final checkpoint is saved in {serialization_dir}. "
        f"{resume_command(serialization_dir)} finishes the run (test evaluation and archive) without training.",
        signal_name)


def training_interrupted(signal_name: str, updates: int, epochs: int, host_calls: int, saved: bool,
                         serialization_dir: str) -> TrainingInterrupted:
    """The error for a signal that stopped training mid-run (`saved`: a checkpoint was written first)."""
    where = (f"A checkpoint was saved in {serialization_dir}" if saved
             else "No checkpointer is configured, so nothing was saved")
    return TrainingInterrupted(
        f"Training was interrupted by {signal_name} after {updates} optimizer updates (epoch {epochs}, {host_calls} "
        f"host calls into it). {where}; resume with {resume_command(serialization_dir)}.", signal_name)
