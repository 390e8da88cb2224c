"""How many CPU threads torch runs with: `num_threads` of the native executor.

torch starts one thread per core whatever else runs. On a machine shared with other jobs those
threads wait on each other (the quickstart trained 5× slower under a load of 7.7 on 2 cores than
with one thread), so the default, ``"auto"``, takes the cores this process may use and leaves out
the ones other jobs keep busy now: measured over a tenth of a second from the kernel's per-core
idle time (/proc/stat), not from the 1-minute load average, which still counts a run that has just
ended (a run started right after another would get half the cores of an idle machine). Where there
is no /proc/stat, the load average less this process's own share stands in.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from ipuflow.config import ConfigurationError

logger = logging.getLogger(__name__)

AUTO = "auto"

# The kernel's 1-minute load average decays with this time constant (seconds).
_LOAD_AVERAGE_WINDOW = 60.0

# The choice "auto" made in this process, kept so that every executor of a run (training, validation,
# a resumed one) computes with the same thread count: a count changes the order of float sums.
_chosen: Optional[int] = None


def choose_cpu_threads(cores: int, load_average: float, own_load: float = 0.0) -> int:
    """The threads for torch on `cores` usable cores while other work keeps `load_average` cores busy
    (a measured count, or the 1-minute load average holding `own_load` of this process's own): one
    per core that the other jobs leave idle, at least one."""
    busy_elsewhere = max(0.0, load_average - own_load)
    return max(1, min(cores, math.floor(cores - busy_elsewhere + 0.5)))


def set_cpu_threads(num_threads: Any) -> None:
    """Set torch's CPU threads for this process: an int as given, ``"auto"`` as `choose_cpu_threads`
    decides for this machine now (once per process), null leaves torch's setting alone."""
    if num_threads == AUTO:
        threads = _auto_threads()
    elif num_threads is None or (isinstance(num_threads, int) and not isinstance(num_threads, bool) and num_threads >= 1):
        threads = num_threads
    else:
        raise ConfigurationError(key="num_threads", expected=f'an int >= 1, "{AUTO}" or null', found=num_threads)
    if threads is not None and threads != torch.get_num_threads():
        # Process-wide: on a machine shared with other jobs, fewer threads than cores avoids oversubscription.
        torch.set_num_threads(threads)


def follow_checkpoint_threads(saved_threads: int) -> bool:
    """After ``"auto"`` chose, take the thread count a checkpoint was written with instead (a resumed
    run then computes as the uninterrupted one would); False where "auto" did not choose or cannot."""
    global _chosen
    if _chosen is None or saved_threads > _usable_cores():
        return False
    if saved_threads != _chosen:
        logger.info("CPU threads: %d, as the checkpoint was written with (num_threads: \"auto\"; it had chosen %d)",
                    saved_threads, _chosen)
        _chosen = saved_threads
        torch.set_num_threads(saved_threads)
    return True


def _auto_threads() -> Optional[int]:
    global _chosen
    if _chosen is not None:
        return _chosen
    if os.environ.get("OMP_NUM_THREADS"):
        logger.info("CPU threads: %d, as OMP_NUM_THREADS sets (trainer.executor.num_threads: \"auto\" follows it)",
                    torch.get_num_threads())
        return None  # torch read it at start-up; torchrun sets it for each of its processes
    cores = min(_usable_cores(), torch.get_num_threads())  # torch's default counts physical cores only
    busy = _cores_busy_now()
    if busy is not None:
        _chosen = choose_cpu_threads(cores, busy)
        logger.info("CPU threads: %d of %d cores (trainer.executor.num_threads: \"auto\": other jobs keep %.1f "
                    "core(s) busy now; an int sets the count, null keeps torch's one per core)", _chosen, cores, busy)
        return _chosen
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None  # no load average here (not a Unix): torch's default
    own = _own_load(cores)
    _chosen = choose_cpu_threads(cores, load, own)
    logger.info("CPU threads: %d of %d cores (trainer.executor.num_threads: \"auto\", from the load average %.1f, "
                "%.1f of it this process's own; an int sets the count, null keeps torch's one per core)",
                _chosen, cores, load, own)
    return _chosen


def busy_cores(before: Dict[str, List[int]], after: Dict[str, List[int]]) -> float:
    """How many of the cores in both /proc/stat samples (name -> jiffies: user, nice, system, idle,
    iowait, irq, softirq, steal) were busy between them: idle and iowait time counts as idle."""
    busy = 0.0
    for name, start in before.items():
        end = after.get(name)
        if end is None:
            continue
        deltas = [later - earlier for earlier, later in zip(start, end)]
        total = sum(deltas[:8])
        if total > 0:
            busy += 1.0 - (deltas[3] + deltas[4]) / total
    return busy


def _cores_busy_now(interval: float = 0.1) -> Optional[float]:
    """The cores of this process's affinity that other work kept busy over `interval` seconds (this
    process sleeps meanwhile); None without /proc/stat."""
    before = _core_times()
    if not before:
        return None
    time.sleep(interval)
    return busy_cores(before, _core_times())


def _core_times() -> Dict[str, List[int]]:
    """/proc/stat's jiffies of each core this process may run on (empty where there is none)."""
    try:
        allowed = {f"cpu{index}" for index in os.sched_getaffinity(0)}
        lines = Path("/proc/stat").read_text().splitlines()
    except (AttributeError, OSError):
        return {}
    times: Dict[str, List[int]] = {}
    for line in lines:
        name, _, values = line.partition(" ")
        if name in allowed:
            times[name] = [int(value) for value in values.split()[:8]]
    return times


def _usable_cores() -> int:
    """The cores this process may run on (its affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_load(cores: int) -> float:
    """About how much of the 1-minute load average this process's own work since it started makes up:
    its busy share of the time it has run, weighted by how far the average has taken that time in."""
    elapsed = _seconds_since_start()
    if elapsed is None or elapsed <= 0:
        return 0.0
    times = os.times()
    busy = min(float(cores), (times.user + times.system) / elapsed)
    return busy * (1.0 - math.exp(-elapsed / _LOAD_AVERAGE_WINDOW))


def _seconds_since_start() -> Optional[float]:
    """Seconds since this process started (Linux's /proc; None elsewhere)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
