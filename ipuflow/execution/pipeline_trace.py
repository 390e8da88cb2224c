"""The IPUs a model's forward pass enters, in the order it enters them, recorded while poptorch traces
it, and poptorch's pipeline rule checked on them before the program compiles.

Blocks a model places itself (`ipu_ops.BeginBlock` on any module, `ipu_ops.Block` scopes inside
`forward`) run in the order `forward` calls them, which registration order does not tell: a head
registered before its body runs after it. poptorch counts stages as its trace meets them
(popart_compiler/source/CompilerImpl.cpp numPipelineStages, poptorch c2a8b177)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution import ipu_ops


def stage_ipus(entered: Sequence[int]) -> List[int]:
    """The IPU of each forward stage: the model starts on IPU 0, and each change of IPU starts one."""
    runs = [0]
    for ipu in entered:
        if ipu != runs[-1]:
            runs.append(ipu)
    return runs


def check_pipeline_accumulation(entered: Sequence[int], accumulation: int) -> None:
    """poptorch's rule for a pipelined training program (CompilerImpl.cpp numPipelineStages,
    Compiler.cpp): training adds a backward stage for each forward one but the last, and gradient
    accumulation must be at least the number of stages, 2·S − 1 for S forward stages."""
    runs = stage_ipus(entered)
    forward = len(runs)
    needed = 2 * forward - 1
    if accumulation < needed:
        raise ConfigurationError(
            f"the model runs on {forward} pipeline stages (IPU {' → '.join(map(str, runs))}); a training pipeline adds a "
            f"backward stage for each forward one but the last, 2 × {forward} − 1 = {needed} in all, and poptorch "
            f"needs gradient_accumulation >= {needed} to fill them, found {accumulation}. Raise "
            "gradient_accumulation, or place the model on fewer IPUs.",
            key="gradient_accumulation",
        )


class PlacementTrace:
    """Within ``with``: records the IPU of every placed module (`placed`: (module, user_id, ipu)) and
    every `ipu_ops.Block` scope as the forward pass enters them; when the model's forward ends, checks
    that each IPU is one the replica has and, with `accumulation` (training), the pipeline rule. A
    refusal is raised from inside the trace (stopping poptorch's compile) and kept in `error`."""

    def __init__(self, model: torch.nn.Module, placed: Sequence[Tuple[torch.nn.Module, Optional[str], int]],
                 ipus_per_replica: int, accumulation: Optional[int]) -> None:
        self._model, self._placed = model, placed
        self._ipus, self._accumulation = ipus_per_replica, accumulation
        self.entered: List[Tuple[Optional[str], int]] = []
        self.error: Optional[ConfigurationError] = None
        self._hooks: List[Any] = []

    def _enter(self, user_id: Optional[str], ipu: Optional[int]) -> None:
        if ipu is not None:
            self.entered.append((user_id, ipu))

    def _check(self) -> None:
        for user_id, ipu in self.entered:
            if ipu >= self._ipus:
                raise ConfigurationError(
                    f"the model places block {user_id!r} on IPU {ipu} (ipu_ops.BeginBlock or ipu_ops.Block), but a "
                    f"replica spans {self._ipus} IPU(s); set ipus_per_replica to at least {ipu + 1}.",
                    key="ipus_per_replica",
                )
        if self._accumulation is not None:
            check_pipeline_accumulation([ipu for _, ipu in self.entered], self._accumulation)

    def _forward_ended(self, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        try:
            self._check()
        except ConfigurationError as error:
            self.error = error
            raise
        finally:
            self.entered = []  # a stand-in traces and runs the same hooks: each forward is checked alone

    def __deepcopy__(self, memo: Any) -> "PlacementTrace":
        return self  # a stand-in's copy of the model keeps hooks that report here

    def __enter__(self) -> "PlacementTrace":
        for module, user_id, ipu in self._placed:
            self._hooks.append(module.register_forward_pre_hook(
                lambda _module, _inputs, user_id=user_id, ipu=ipu: self._enter(user_id, ipu)))
        self._hooks.append(self._model.register_forward_hook(self._forward_ended))
        self._hooks.append(ipu_ops.observe_block_scopes(self._enter))
        return self

    def __exit__(self, *exc: Any) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
