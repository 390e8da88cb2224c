"""Decisions every rank must take together: a rank that validates, checkpoints or stops alone
would wait forever at the others' next collective. Each rank's requests are combined (any rank
asking is enough) once per host call, so the group acts on them at the same call."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ipuflow.distributed.collectives import any_rank
from ipuflow.distributed.process_group import current

SIGNAL_ON_ANOTHER_RANK = "a signal to another rank"


def agree_on_requests(control: Any, interrupts: Optional[Any]) -> None:
    """Make the callbacks' requests (every bool of the `TrainerControl` dataclass: should_stop,
    should_save, should_validate...) and a signal received by any rank hold on every rank; a no-op
    in one process."""
    if current() is None:
        return
    interrupted = interrupts is not None and interrupts.interrupted
    requests = [field.name for field in dataclasses.fields(control) if isinstance(getattr(control, field.name), bool)]
    *agreed, signalled = any_rank([getattr(control, name) for name in requests] + [interrupted])
    for name, value in zip(requests, agreed):
        setattr(control, name, value)
    if signalled and interrupts is not None and not interrupted:
        interrupts.signal_name = SIGNAL_ON_ANOTHER_RANK
