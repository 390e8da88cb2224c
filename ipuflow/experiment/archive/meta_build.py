"""Building a model on PyTorch's meta device to learn its sizes, without its random initialisation."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, FrozenSet, Iterator, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

# The in-place random fills of a tensor. Their meta implementations are Python references that
# import torch's compiler (torch._dynamo, about 0.9 s of CPU) on first use, to build values a meta
# tensor never holds.
_RANDOM_FILLS = ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_",
                 "log_normal_", "cauchy_")


def _skipped_functions() -> FrozenSet[Callable[..., Any]]:
    """The tensor methods above and every in-place initialiser of `torch.nn.init` (which call them
    with torch-function modes switched off, out of this mode's reach)."""
    methods = {getattr(torch.Tensor, name) for name in _RANDOM_FILLS if hasattr(torch.Tensor, name)}
    initialisers = {function for name, function in vars(torch.nn.init).items()
                    if name.endswith("_") and not name.startswith("_") and callable(function)}
    return frozenset(methods | initialisers)


class _SkipMetaInitialisation(TorchFunctionMode):
    """Returns a meta tensor unchanged from an initialiser instead of computing values it cannot hold."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped = _skipped_functions()

    def __torch_function__(self, func: Callable[..., Any], types: Tuple[type, ...], args: Tuple[Any, ...] = (),
                           kwargs: Optional[Dict[str, Any]] = None) -> Any:
        # torch.nn.init passes its tensor by keyword; a tensor method gets it as `self`.
        target = args[0] if args else (kwargs or {}).get("tensor")
        if func in self.skipped and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def building_on_meta() -> Iterator[None]:
    """Create tensors on the meta device (shapes and dtypes, no memory, no values) and skip the
    random initialisation of those tensors."""
    with torch.device("meta"), _SkipMetaInitialisation():
        yield
