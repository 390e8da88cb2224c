"""The IPU options of the poptorch executor, validated as optimum-graphcore's IPUConfig validates them.

Training values and their ``inference_*`` twins: `layers_per_ipu` (-1 = share the rest evenly),
`ipus_per_replica` (default: one per `layers_per_ipu` entry), `matmul_proportion` (one float or one
per IPU), `embedding_serialization_factor`. The inference twins fall back as IPUConfig's do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Union

from ipuflow.config import ConfigurationError, validators

MatmulProportion = Union[float, List[float]]


def _error(key: str, message: str) -> ConfigurationError:
    return ConfigurationError(message, key=key)


@dataclass(frozen=True)
class IpuPlacement:
    """One mode's (training or inference) placement: layers per IPU, IPUs, memory proportions."""

    layers_per_ipu: List[int]
    ipus_per_replica: int
    matmul_proportion: List[float]
    embedding_serialization_factor: int

    def layer_ipus(self, layers: int, key: str = "layers_per_ipu") -> List[int]:
        """The IPU of each of `layers` layers (IPUConfig's wildcard expansion)."""
        if self.ipus_per_replica == 1:
            return [0] * layers
        counts = list(self.layers_per_ipu)
        if len(counts) != self.ipus_per_replica:
            if counts == [-1]:
                counts = [-1] * self.ipus_per_replica
            else:
                raise _error(key, f"has a non-default value set, but its length ({len(counts)}) does not match "
                                  f"ipus_per_replica ({self.ipus_per_replica}).")
        wildcards = [index for index, count in enumerate(counts) if count == -1]
        if wildcards:
            left = layers - sum(count for count in counts if count != -1)
            if left < 0:
                raise _error(key, f"{self.layers_per_ipu} places more layers than the model's {layers}.")
            share, remainder = divmod(left, len(wildcards))
            for index in wildcards:
                counts[index] = share
            counts[wildcards[-1]] += remainder
        if sum(counts) != layers:
            raise _error(key, f"{self.layers_per_ipu} does not define the correct number of layers for the model ({layers}).")
        return [ipu for ipu, count in enumerate(counts) for _ in range(count)]


def _check_layers(key: str, value: List[int]) -> List[int]:
    if not isinstance(value, list) or not value:
        raise _error(key, f"expected a non-empty list of ints >= -1, found {value!r}.")
    for count in value:
        if isinstance(count, bool) or not isinstance(count, int) or count < -1:
            raise _error(key, f"expected a list of ints >= -1 (-1 shares the remaining layers), found {value!r}.")
    return value


def _check_proportion(key: str, value: MatmulProportion, ipus: int) -> List[float]:
    values = value if isinstance(value, list) else [value] * ipus
    for proportion in values:
        if isinstance(proportion, bool) or not isinstance(proportion, (int, float)) or proportion < 0:
            raise _error(key, f"expected a number >= 0 or a list of them, found {value!r}.")
    if len(values) != ipus:
        raise _error(key, f"has {len(values)} entries, but there are {ipus} IPUs per replica; give one per IPU or a single number.")
    return [float(proportion) for proportion in values]


def resolve_placements(
    layers_per_ipu: Optional[List[int]],
    inference_layers_per_ipu: Optional[List[int]],
    ipus_per_replica: Optional[int],
    inference_ipus_per_replica: Optional[int],
    matmul_proportion: MatmulProportion,
    inference_matmul_proportion: Optional[MatmulProportion],
    embedding_serialization_factor: Optional[int],
    inference_embedding_serialization_factor: Optional[int],
) -> "tuple[IpuPlacement, IpuPlacement]":
    """The training and inference placements, with IPUConfig's defaults and checks."""
    layers = _check_layers("layers_per_ipu", layers_per_ipu if layers_per_ipu is not None else [-1])
    for key, value in (("ipus_per_replica", ipus_per_replica), ("inference_ipus_per_replica", inference_ipus_per_replica),
                       ("embedding_serialization_factor", embedding_serialization_factor),
                       ("inference_embedding_serialization_factor", inference_embedding_serialization_factor)):
        validators.positive_int(key, value, optional=True)
    ipus = ipus_per_replica if ipus_per_replica is not None else len(layers)
    inference_layers = _check_layers("inference_layers_per_ipu", inference_layers_per_ipu if inference_layers_per_ipu is not None else layers)
    if inference_ipus_per_replica is not None:
        inference_ipus = inference_ipus_per_replica
    elif ipus == len(layers) or inference_layers != [-1]:
        inference_ipus = len(inference_layers)
    else:
        inference_ipus = ipus
    for key, counts, count in (("layers_per_ipu", layers, ipus), ("inference_layers_per_ipu", inference_layers, inference_ipus)):
        if -1 not in counts and len(counts) != count:
            raise _error(key, f"has {len(counts)} entries but ipus_per_replica is {count}; give one entry per IPU.")
    proportion = _check_proportion("matmul_proportion", matmul_proportion, ipus)
    if inference_matmul_proportion is not None:
        inference_proportion = _check_proportion("inference_matmul_proportion", inference_matmul_proportion, inference_ipus)
    elif isinstance(matmul_proportion, list) and len(matmul_proportion) != inference_ipus:
        inference_proportion = [0.2] * inference_ipus  # IPUConfig's fallback when the list cannot carry over
    else:
        inference_proportion = _check_proportion("inference_matmul_proportion", matmul_proportion, inference_ipus)
    factor = embedding_serialization_factor or 1
    inference_factor = inference_embedding_serialization_factor or factor
    for key, value in (("embedding_serialization_factor", factor), ("inference_embedding_serialization_factor", inference_factor)):
        if value != 1:
            raise _error(
                key,
                f"serialised embeddings (factor {value}) need optimum-graphcore's SerializedEmbedding, which "
                "ipuflow does not provide; use 1 (the default) or serialise the embedding in the model.",
            )
    return (
        IpuPlacement(layers, ipus, proportion, factor),
        IpuPlacement(inference_layers, inference_ipus, inference_proportion, inference_factor),
    )
