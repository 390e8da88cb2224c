"""transformers' report of the weights a load did not match, cut to one line.

On every load of a pretrained model with a new task head, transformers logs a table (20 lines in
5.x, a paragraph in 4.x) of the head's weights as missing. That is expected, not a problem, so
ipuflow holds the report back and logs one line saying which weights are new; `--debug`
(IPUFLOW_DEBUG=1) lets transformers' report through as well.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator, List, Mapping, Sequence

from ipuflow.debug_mode import debug_enabled

logger = logging.getLogger(__name__)

# The loggers transformers writes its loading report to (4.x: modeling_utils; 5.x: the same, and layers).
# 5.x checks its tensor-parallel plan, and warns of every layer as "not sharded", when modeling_utils'
# level is WARNING or above: that logger is held back too.
_REPORT_LOGGERS = ("transformers.modeling_utils", "transformers.modeling_layers", "transformers.distributed.tensor_parallel")


@contextlib.contextmanager
def quiet_load_report() -> Iterator[None]:
    """Within the block, transformers logs only errors (all of it with `--debug`)."""
    if debug_enabled():
        yield
        return
    from transformers.utils import logging as transformers_logging

    loggers = [logging.getLogger(name) for name in _REPORT_LOGGERS]
    levels = [each.level for each in loggers]
    bar = transformers_logging.is_progress_bar_enabled()
    for each in loggers:
        each.setLevel(logging.ERROR)
    transformers_logging.disable_progress_bar()  # 5.x draws a bar of the weights it loads, each load
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)
        if bar:
            transformers_logging.enable_progress_bar()


def log_load_summary(what: str, source: str, loading_info: Mapping[str, Any]) -> None:
    """One line about the weights `source` did not provide for `what` (a transformers model class)
    and those it held that `what` does not use; the names in full with `--debug`."""
    new = sorted(set(loading_info.get("missing_keys") or []) |
                 {str(item[0]) for item in loading_info.get("mismatched_keys") or []})
    unused = sorted(loading_info.get("unexpected_keys") or [])
    if not new and not unused:
        return
    parts: List[str] = []
    if new:
        parts.append(f"{len(new)} new weights, randomly initialised, to train: {_modules(new)}")
    if unused:
        parts.append(f"{len(unused)} of its weights unused: {_modules(unused)}")
    logger.info("%s from %s: %s%s.", what, source, "; ".join(parts),
                "" if debug_enabled() else " (--debug lists them)")
    if debug_enabled():
        logger.info("New weights: %s. Unused weights: %s.", ", ".join(new) or "none", ", ".join(unused) or "none")


def _modules(names: Sequence[str]) -> str:
    """The modules that `names` (parameter names) belong to, e.g. 'classifier' for its weight and bias."""
    modules = list(dict.fromkeys(name.rpartition(".")[0] or name for name in names))
    return ", ".join(modules[:4]) + (f" and {len(modules) - 4} more" if len(modules) > 4 else "")
