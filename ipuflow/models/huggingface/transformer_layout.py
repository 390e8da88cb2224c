"""The pipeline layout of a `transformers` model, found from its module tree, so that the poptorch
executor places it on IPUs from `layers_per_ipu` alone, as optimum-graphcore's pipelined models place
themselves (ipuflow/execution/pipeline_layout.py says where each part goes).

The parts are found by what transformers models share rather than per architecture:

* layers: each `ModuleList` named `layer`, `layers`, `block`, `blocks` or `h` whose items are of one
  class (BERT, RoBERTa, DeBERTa: `encoder.layer`; DistilBERT: `transformer.layer`; GPT-2:
  `transformer.h`; T5: `encoder.block` and `decoder.block`; BART: `encoder.layers` and
  `decoder.layers`; Llama-style: `layers`), lists inside a layer left out, in registration order
  (an encoder before its decoder);
* embeddings: each `nn.Embedding` and each module named `embeddings` outside the layers and heads;
* heads: the task model's own modules with weights beside its base model (`classifier`,
  `qa_outputs`, `score`, `lm_head`, ...), and those of a task model inside it (the decoder of an
  `EncoderDecoderModel`); a head sharing a weight with an embedding is tied to it.
"""

from __future__ import annotations

from typing import Any, List, Set, Tuple

import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution.pipeline_layout import NamedModules, PipelineLayout

LAYER_LIST_NAMES = ("layer", "layers", "block", "blocks", "h")
"""The names transformers gives its layer lists."""


def transformer_layout(model: torch.nn.Module, prefix: str) -> PipelineLayout:
    """The pipeline layout of the transformers model `model` (its modules named under `prefix`); a
    ConfigurationError naming `pipeline_layers` when no layer list can be found."""
    layers = _layer_lists(model)
    if not layers:
        raise ConfigurationError(
            f"the {type(model).__name__} model has no layer list ipuflow recognises (a ModuleList named "
            f"{', '.join(LAYER_LIST_NAMES)}), so it cannot be split across IPUs by layers_per_ipu; give the dotted "
            f"path of its layer list here, e.g. \"{prefix}.encoder.layer\".",
            key="pipeline_layers",
        )
    layer_names = [name for name, _ in layers]
    heads = _heads(model, "", layer_names)
    head_names = [name for name, _ in heads]
    embeddings = _embeddings(model, layer_names + head_names)
    embedding_weights = {id(parameter) for _, module in embeddings for parameter in module.parameters()}
    tied = tuple(_named(prefix, name) for name, module in heads
                 if any(id(parameter) in embedding_weights for parameter in module.parameters()))
    return PipelineLayout(
        embeddings=_prefixed(prefix, embeddings),
        layers=tuple((_named(prefix, f"{name}.{index}"), layer) for name, stack in layers for index, layer in enumerate(stack)),
        heads=_prefixed(prefix, heads),
        tied_heads=tied,
    )


def _layer_lists(model: torch.nn.Module) -> List[Tuple[str, torch.nn.ModuleList]]:
    found: List[Tuple[str, torch.nn.ModuleList]] = []
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer, _ in found):
            continue  # a list inside a layer (T5's block.N.layer) is part of that layer
        if (isinstance(module, torch.nn.ModuleList) and len(module) > 0 and name.rpartition(".")[2] in LAYER_LIST_NAMES
                and len({type(item) for item in module}) == 1):
            found.append((name, module))
    return found


def _encloses(name: str, others: List[str]) -> bool:
    """Whether module `name` is one of `others` or holds one of them."""
    return any(other == name or other.startswith(f"{name}.") for other in others)


def _heads(model: torch.nn.Module, at: str, layers: List[str]) -> List[Tuple[str, torch.nn.Module]]:
    """The task heads of `model` (named under `at`): its own modules with weights beside its base
    model, and, for a module holding layers that is itself a task model, that model's heads."""
    base = getattr(model, "base_model", model)
    heads: List[Tuple[str, torch.nn.Module]] = []
    for name, child in model.named_children():
        full = f"{at}{name}"
        if child is base or isinstance(child, torch.nn.Embedding) or name == "embeddings":
            continue
        if _encloses(full, layers):
            if getattr(child, "base_model", child) is not child:  # a task model inside: its heads too
                heads += _heads(child, f"{full}.", layers)
            continue
        if any(True for _ in child.parameters()):
            heads.append((full, child))
    return heads


def _embeddings(model: torch.nn.Module, elsewhere: List[str]) -> List[Tuple[str, torch.nn.Module]]:
    found: List[Tuple[str, torch.nn.Module]] = []
    taken: Set[str] = set()
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer in taken) or any(name == other or name.startswith(f"{other}.")
                                                                       for other in elsewhere):
            continue
        if isinstance(module, torch.nn.Embedding) or name.rpartition(".")[2] == "embeddings":
            found.append((name, module))
            taken.add(name)
    return found


def _named(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _prefixed(prefix: str, modules: List[Tuple[str, torch.nn.Module]]) -> NamedModules:
    return tuple((_named(prefix, name), module) for name, module in modules)


class TransformerPipelineLayout:
    """For models wrapping a transformers model as `self.transformer`: its pipeline layout, so that
    the poptorch executor places it from `layers_per_ipu` (the `Model.pipeline_layout` hook)."""

    transformer: Any  # a transformers PreTrainedModel

    def pipeline_layout(self) -> PipelineLayout:
        """The wrapped transformers model's embeddings, layers and heads (transformer_layout)."""
        return transformer_layout(self.transformer, "transformer")
