"""A test-only callback, loaded with --include-package into torchrun ranks: it records what each
rank sees (is_primary, batches) and injects a fault or a stop request on one rank (also loaded into
single-process runs, as rank 0, to interrupt training at a chosen host call)."""

from __future__ import annotations

import atexit
import json
import os
import signal
from pathlib import Path
from typing import Any, List

from ipuflow.training.callbacks.callback import TrainerCallback


@TrainerCallback.register("rank_probe")
class RankProbe(TrainerCallback):
    """Writes ``rank{R}.json`` into `record_to` at the end; on rank `on_rank`, at training host call
    `at_batch`, does `action`: ``raise`` (an error), ``sigkill``/``sigterm``/``sigint`` (to itself) or ``stop``
    (asks the trainer to stop). At interpreter exit it writes ``threads{R}.json``: the names of the
    native threads still running then (gloo's worker threads must be gone by that point)."""

    def __init__(self, serialization_dir: str, record_to: str, on_rank: int = -1, at_batch: int = 0,
                 action: str = "none") -> None:
        super().__init__(serialization_dir)
        self.record_to = Path(record_to)
        self.on_rank = on_rank
        self.at_batch = at_batch
        self.action = action
        self.rank = int(os.environ.get("RANK", "0"))
        self.events: List[Any] = []
        atexit.register(_record_threads_at_exit, self.record_to / f"threads{self.rank}.json")

    def on_train_begin(self, event: Any) -> None:
        self.events.append(["start", event.is_primary])

    def on_step_end(self, event: Any) -> None:
        batch = event.batch
        self.events.append(["batch", event.is_primary, int(next(iter(batch.values())).shape[0])])
        if self.rank == self.on_rank and event.state.host_calls == self.at_batch:
            if self.action == "raise":
                raise RuntimeError(f"injected failure on rank {self.rank}")
            if self.action == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.action == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            if self.action == "sigint":
                os.kill(os.getpid(), signal.SIGINT)
            if self.action == "stop":
                event.control.should_stop = True

    def on_train_end(self, event: Any) -> None:
        self.record_to.mkdir(parents=True, exist_ok=True)
        (self.record_to / f"rank{self.rank}.json").write_text(json.dumps(self.events))


def _record_threads_at_exit(path: Path) -> None:
    tasks = Path("/proc/self/task")
    names = sorted((task / "comm").read_text().strip() for task in tasks.iterdir()) if tasks.is_dir() else []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(names))
