"""Telling apart, under torchrun, an error every rank raised alike (a model that cannot run the
config's shapes) from one rank's own: each rank posts its error to torchrun's store, and a rank other
than 0 stays quiet when rank 0 posted the same one, which rank 0 prints."""

from __future__ import annotations

import datetime
import os
from typing import Optional

# How long a rank other than 0 waits for rank 0's error. Rank 0 raising the same error does so
# within moments; one still training fails only after this rank exits, so the wait is the delay a
# rank's own error pays before it is printed.
WAIT_SECONDS = 5.0
_PREFIX = "ipuflow/error"


def _store(timeout: float) -> Optional[object]:
    """A client of the store torchrun's agent serves at MASTER_ADDR:MASTER_PORT (None if unreachable)."""
    try:
        import torch.distributed as dist

        return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                             timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)
    except Exception:  # noqa: BLE001 - no store means no comparison: every rank prints its own
        return None


def raised_alike_by_rank_0(message: str, rank: int) -> bool:
    """Post this rank's error `message`; on ranks other than 0, whether rank 0 posted the same one
    within `WAIT_SECONDS` (then rank 0 prints it and this rank need not)."""
    store = _store(WAIT_SECONDS)
    if store is None:
        return False
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    try:
        store.set(f"{_PREFIX}/{attempt}/{rank}", message)  # type: ignore[attr-defined]
        if rank == 0:
            return False
        key = f"{_PREFIX}/{attempt}/0"
        store.wait([key], datetime.timedelta(seconds=WAIT_SECONDS))  # type: ignore[attr-defined]
        return bytes(store.get(key)).decode("utf-8", "replace") == message  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - rank 0 posted nothing in time (or the store went away): print
        return False
