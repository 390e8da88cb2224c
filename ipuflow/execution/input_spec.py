"""The input spec an executor fixes at compile time: the batch's keys, shapes and dtypes."""

from __future__ import annotations

from typing import Any, List, Mapping, Tuple

import torch

from ipuflow.execution.options import BatchingPlan

Signature = Tuple[Tuple[str, Tuple[int, ...], torch.dtype], ...]
Structure = Tuple[Tuple[str, int, int, torch.dtype], ...]


def batch_signature(batch: Mapping[str, Any]) -> Signature:
    """The (key, shape, dtype) of every tensor in `batch`, in key order."""
    return tuple((key, tuple(value.shape), value.dtype) for key, value in batch.items())


def batch_structure(batch: Mapping[str, Any]) -> Structure:
    """The (key, dim 0, number of dims, dtype) of every tensor in `batch`, in key order."""
    return tuple((key, value.shape[0], value.dim(), value.dtype) for key, value in batch.items())


class InputSpec:
    """The structure, shapes and dtypes of combined batches, fixed by `compile`.

    Compiled executors (poptorch, `torch.compile` without dynamic shapes) run one program per input
    signature; a batch that matches none of the compiled signatures is an error, not a silent
    recompile. Keys, dtypes and dim 0 are the same for every signature; only the other dims
    (sequence lengths under ``length_buckets``) may differ, and only between signatures passed to
    `compile` explicitly. With `any_lengths` (an eager executor fed batches padded to their own
    longest list) the other dims may be anything: keys, dtypes, dim 0 and the number of dims stay fixed.
    """

    def __init__(self, batch: Mapping[str, Any], plan: BatchingPlan, any_lengths: bool = False) -> None:
        self.micro_batch = self._validate(batch, plan)
        self.combined_batch = self.micro_batch * plan.batch_size_factor
        first = batch_signature(batch)
        self.signatures: List[Signature] = [first]
        self._known = {first}
        self._structure = batch_structure(batch)
        self.any_lengths = any_lengths

    @staticmethod
    def _validate(batch: Mapping[str, Any], plan: BatchingPlan) -> int:
        if not isinstance(batch, Mapping) or not batch:
            raise TypeError(f"A combined batch must be a non-empty dict of tensors, got {type(batch).__name__}.")
        micro_batch = None
        for key, value in batch.items():
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"Batch entry {key!r} is a {type(value).__name__}; executors take tensors only "
                    "(keep metadata out of the batch)."
                )
            if value.dim() == 0:
                raise ValueError(f"Batch entry {key!r} is 0-d; every input needs a batch dimension.")
            size = plan.check_batch_size(key, value.shape[0])
            if micro_batch is not None and size != micro_batch:
                raise ValueError(f"Batch entry {key!r} has dim 0 = {value.shape[0]}, unlike the other inputs.")
            micro_batch = size
        return micro_batch  # type: ignore[return-value]

    def matches(self, batch: Mapping[str, Any]) -> bool:
        """Whether `batch` has one of the compiled signatures (with `any_lengths`, their structure)."""
        try:
            if self.any_lengths:
                return batch_structure(batch) == self._structure
            return batch_signature(batch) in self._known
        except AttributeError:  # a non-tensor value
            return False

    def add(self, batch: Mapping[str, Any], plan: BatchingPlan) -> bool:
        """Accept another signature that differs only outside dim 0; False if already known."""
        signature = batch_signature(batch)
        if signature in self._known:
            return False
        self._validate(batch, plan)
        first = self.signatures[0]
        if [key for key, _, _ in signature] != [key for key, _, _ in first]:
            self.check(batch)  # raises the structure error
        for (key, shape, dtype), (_, first_shape, first_dtype) in zip(signature, first):
            if dtype != first_dtype or shape[0] != first_shape[0] or len(shape) != len(first_shape):
                self.check(batch)  # raises the dtype or shape error
        self.signatures.append(signature)
        self._known.add(signature)
        return True

    def check(self, batch: Mapping[str, Any]) -> None:
        """Raise if `batch` matches none of the compiled signatures, saying how it differs."""
        if self.matches(batch):
            return
        expected = self.signatures[0]
        keys = [key for key, _, _ in expected]
        if list(batch.keys()) != keys:
            raise ValueError(
                f"Structure mismatch: the executor was compiled for inputs {keys}, got {list(batch)}. "
                "Build a new executor (or destroy() this one) to change the inputs."
            )
        for key, shape, dtype in expected:
            value = batch[key]
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"Type mismatch for {key}: expected a tensor, got {type(value).__name__}.")
            if value.dtype != dtype:
                raise ValueError(
                    f"Data type mismatch for {key}: expected {dtype} but got {value.dtype}. Build a new "
                    "executor (or destroy() this one) to change dtypes."
                )
        if self.any_lengths:
            for key, shape, _ in expected:
                got = tuple(batch[key].shape)
                if len(got) != len(shape) or got[0] != shape[0]:
                    raise ValueError(f"Shape mismatch for {key}: expected {len(shape)} dims with dim 0 = {shape[0]} "
                                     f"but got {got}.")
        shapes = {key: [signature[index][1] for signature in self.signatures] for index, key in enumerate(keys)}
        for key in keys:
            got = tuple(batch[key].shape)
            if got not in shapes[key]:
                expected_text = " or ".join(str(shape) for shape in dict.fromkeys(shapes[key]))
                raise ValueError(
                    f"Shape mismatch for {key}: expected {expected_text} but got {got}. Compiled executors "
                    "take fixed shapes: pad to a fixed max_length (or compile each of the loader's "
                    "length_buckets explicitly) and drop or pad the last combined batch; or build a new "
                    "executor (or destroy() this one)."
                )
        raise ValueError(
            "Shape mismatch: this combination of input shapes was not compiled "
            f"({[(key, tuple(batch[key].shape)) for key in keys]}); compile it explicitly first."
        )
