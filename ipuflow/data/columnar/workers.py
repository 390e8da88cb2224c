"""Running a function over a stream of work items in forked worker processes, results in order."""

from __future__ import annotations

import multiprocessing
from typing import Any, Callable, Iterable, Iterator, Optional

_function: Optional[Callable[[Any], Any]] = None


def _install(function: Callable[[Any], Any]) -> None:
    global _function
    _function = function


def _call(item: Any) -> Any:
    assert _function is not None
    return _function(item)


def map_in_workers(function: Callable[[Any], Any], items: Iterable[Any], num_workers: int) -> Iterator[Any]:
    """`function(item)` for each item, in order: here when `num_workers` is 0, else in that many
    worker processes. Workers are forked where the platform allows, so `function` (a reader's
    bound method, with its tokenizer) is inherited rather than sent with every item."""
    if num_workers <= 0:
        yield from map(function, items)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with context.Pool(num_workers, initializer=_install, initargs=(function,)) as pool:
        yield from pool.imap(_call, items)
