"""A model's pipeline layout: which of its modules go on IPU 0, which are spread by `layers_per_ipu`,
which go on the last IPU; and the placement that layout gets from one mode's `IpuPlacement`.

optimum-graphcore's pipelined models place themselves in `parallelize()` (optimum/graphcore/models/
*/modeling_*.py, e.g. `PipelinedBertForTokenClassification`): the embeddings on IPU 0, each layer on
the IPU `get_layer_ipu(ipu_config, layers)` gives it (modeling_utils.py; -1 entries share the layers
left over), the task head on the last IPU (`ipus_per_replica - 1`), and a head whose weights are the
input embeddings' (an LM head) on IPU 0 beside them. An encoder-decoder model's encoder and decoder
layers form one list, encoder first (T5 and BART `parallelize()`). A model describes its parts with a
`PipelineLayout` (`Model.pipeline_layout`); the poptorch executor and `--dry-run` place it alike.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import torch

from ipuflow.execution.ipu_config import IpuPlacement

logger = logging.getLogger(__name__)

NamedModules = Tuple[Tuple[str, torch.nn.Module], ...]


@dataclass(frozen=True)
class PipelineLayout:
    """A model's parts as a pipeline places them, each a (dotted name, module) pair, in the order the
    model registers them.

    `embeddings` go on IPU 0; `layers` (every layer list, an encoder's before its decoder's) are spread
    by `layers_per_ipu`; `heads` go on the last IPU of a replica, except those in `tied_heads`, whose
    weights are the embeddings' and which stay with them on IPU 0. A module left out runs where the
    module before it in the forward pass runs (poptorch's BeginBlock: a block lasts until the next)."""

    embeddings: NamedModules
    layers: NamedModules
    heads: NamedModules = ()
    tied_heads: Tuple[str, ...] = ()


@dataclass(frozen=True)
class PlacedModule:
    """One module a pipeline block starts at: its dotted name, the module and its IPU."""

    name: str
    module: torch.nn.Module
    ipu: int


def model_layout(model: torch.nn.Module) -> Optional[PipelineLayout]:
    """The layout `model` declares (`Model.pipeline_layout`), or None for a model that declares none."""
    # Asked by name: execution sits below models.
    declared = getattr(model, "pipeline_layout", None)
    return declared() if callable(declared) else None


def place_layout(layout: PipelineLayout, placement: IpuPlacement, key: str = "layers_per_ipu") -> List[PlacedModule]:
    """The IPU of each module the layout names (embeddings, layers, heads) for one mode's `placement`;
    `layers_per_ipu` (named `key` in errors) must add up to the layout's layers, as optimum requires."""
    layer_ipus = placement.layer_ipus(len(layout.layers), key)
    last = placement.ipus_per_replica - 1
    placed = [PlacedModule(name, module, 0) for name, module in layout.embeddings]
    placed += [PlacedModule(name, module, ipu) for (name, module), ipu in zip(layout.layers, layer_ipus)]
    placed += [PlacedModule(name, module, 0 if name in layout.tied_heads else last) for name, module in layout.heads]
    return placed


def describe_placement(placed: Sequence[PlacedModule], layers: NamedModules) -> List[str]:
    """One line per block, consecutive layers on one IPU merged: ``"transformer.bert.encoder.layer.0-2: IPU 0"``."""
    layer_names = {name for name, _ in layers}
    lines: List[str] = []
    run: List[Any] = []  # [first name, last index, ipu] of the layer run being merged
    for item in placed:
        stem, _, index = item.name.rpartition(".")
        if item.name in layer_names and run and run[0].rpartition(".")[0] == stem and run[2] == item.ipu:
            run[1] = index
            continue
        if run:
            lines.append(_run_line(run))
        run = [item.name, None, item.ipu]
    if run:
        lines.append(_run_line(run))
    return lines


def _run_line(run: List[Any]) -> str:
    first, last, ipu = run
    return f"{first}{'-' + last if last is not None else ''}: IPU {ipu}"


def layout_blocks(model: torch.nn.Module, placement: IpuPlacement,
                  key: str) -> Tuple[Optional[List[torch.nn.Module]], List[Tuple[torch.nn.Module, Tuple[Optional[str], Optional[int]]]]]:
    """For the poptorch executor: the layers of the model's declared layout (None without one) and its
    other blocks as ``(module, (user_id, ipu_id))``, placed for `placement` (`key` names layers_per_ipu)."""
    layout = model_layout(model)
    if layout is None:
        return None, []
    layers = [module for _, module in layout.layers]
    in_layers = {id(module) for module in layers}
    placed = place_layout(layout, placement, key)
    logger.info("Placing the model on %d IPU(s) per replica (%s %s): %s", placement.ipus_per_replica, key,
                placement.layers_per_ipu, "; ".join(describe_placement(placed, layout.layers)))
    return layers, [(item.module, (item.name, item.ipu)) for item in placed if id(item.module) not in in_layers]
