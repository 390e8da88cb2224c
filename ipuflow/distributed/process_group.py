"""The one process group of a run launched by torchrun: detecting the launch, starting and ending
the group, and the rank facts (rank, world size, device) everything else asks for."""

from __future__ import annotations

import datetime
import gc
import os
from dataclasses import dataclass
from typing import Optional

import torch

from ipuflow.config import ConfigurationError

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_TIMEOUT_SECONDS = 600.0
TIMEOUT_ENV = "IPUFLOW_DISTRIBUTED_TIMEOUT"
"""Environment variable: seconds a collective may wait for the other ranks before failing
(default 600). torchrun's agent normally ends every rank as soon as one fails; this is the backstop."""

_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the replica group: one rank per replica."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device

    @property
    def is_primary(self) -> bool:
        """Rank 0: the one that writes the serialization directory and prints."""
        return self.rank == 0


_current: Optional[DistributedContext] = None


def launched_by_torchrun() -> bool:
    """Whether this process is a worker started by torchrun (its environment variables are set)."""
    return all(name in os.environ for name in _TORCHRUN_VARIABLES)


def environment_rank() -> int:
    """The rank torchrun gave this process (0 when not launched by torchrun); readable before the
    group starts, e.g. to print an error once."""
    try:
        return int(os.environ.get("RANK", "0")) if launched_by_torchrun() else 0
    except ValueError:
        return 0


def current() -> Optional[DistributedContext]:
    """The running group's context, None in a single-process run."""
    return _current


def is_primary() -> bool:
    """True in a single-process run and on rank 0 of a group."""
    return _current is None or _current.is_primary


def choose_backend(backend: str, uses_cuda: bool) -> str:
    """``auto`` is nccl when the executor runs on CUDA and gloo otherwise; gloo or nccl as given."""
    if backend not in BACKENDS:
        raise ConfigurationError(
            f"trainer.executor.distributed_backend: expected one of {', '.join(map(repr, BACKENDS))}, found {backend!r}."
        )
    if backend == "auto":
        return "nccl" if uses_cuda else "gloo"
    if backend == "nccl" and not uses_cuda:
        raise ConfigurationError(
            "trainer.executor.distributed_backend: 'nccl' needs the executor on CUDA, but it runs on the CPU here "
            "(executor.device, or no CUDA device visible); use 'gloo' or 'auto'."
        )
    return backend


def _timeout() -> datetime.timedelta:
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        seconds = float(text) if text else DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        raise ConfigurationError(f"{TIMEOUT_ENV}: expected a number of seconds, found {text!r}.") from None
    return datetime.timedelta(seconds=seconds)


def start(backend: str, uses_cuda: bool) -> DistributedContext:
    """Join the group torchrun set up (``env://``: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    On CUDA each rank takes ``cuda:LOCAL_RANK``. Collectives time out after `TIMEOUT_ENV` seconds.
    """
    global _current
    import torch.distributed as dist

    if _current is not None:
        return _current
    chosen = choose_backend(backend, uses_cuda)
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cpu")
    if chosen == "nccl":
        refuse_more_ranks_than_gpus(local_rank)
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    _bind_collective_defaults_before_the_group_exists()
    dist.init_process_group(backend=chosen, timeout=_timeout(), device_id=device if chosen == "nccl" else None)
    _current = DistributedContext(
        rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, backend=chosen, device=device,
    )
    return _current


def _bind_collective_defaults_before_the_group_exists() -> None:
    """Import `torch.distributed.nn.functional` while there is no default group yet.

    Its functions take ``group=group.WORLD`` as a default argument, evaluated on import. Imported
    after `init_process_group` (training imports `torch._dynamo` lazily, which imports FSDP and
    through it this module), they would hold the group for good: `destroy_process_group` could then not free it, gloo's
    worker threads would outlive the command, and one freeing a finished collective's tensors
    while the interpreter finalizes aborts the rank after a complete run ("terminate called
    without an active exception").
    """
    import torch.distributed.nn.functional  # noqa: F401


def stop(completed: bool = True) -> None:
    """Leave the group (every rank calls this at the end of the command). After a `completed`
    command the ranks first meet at a barrier: a rank that tears gloo down while its peer still
    talks to it can abort ("terminate called without an active exception"). After an error there
    is no barrier, since a failed peer would never arrive."""
    global _current
    import torch.distributed as dist

    if _current is None:
        return
    _current = None
    if dist.is_initialized():
        if completed:
            dist.barrier()
        dist.destroy_process_group()
        gc.collect()  # the model's DDP wrapper sits in reference cycles: freeing it frees the group and joins gloo's threads


def refuse_more_ranks_than_gpus(local_rank: int) -> None:
    """A ConfigurationError if this rank's GPU, ``cuda:LOCAL_RANK``, does not exist."""
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise ConfigurationError(
            f"trainer.executor.device: on CUDA each rank takes cuda:LOCAL_RANK; torchrun started local rank {local_rank}, "
            f"but this machine has {count} CUDA "
            f"device{'s' if count != 1 else ''}: start at most one process per GPU (--nproc_per_node), "
            "or train on the CPU with trainer.executor.device: 'cpu'."
        )


def refuse_fixed_cuda_device(device: object) -> None:
    """A ConfigurationError for a fixed ``cuda:N`` device under torchrun (every rank would share one GPU)."""
    if isinstance(device, str) and device.startswith("cuda:"):
        raise ConfigurationError(
            f"trainer.executor.device: {device!r} would put every rank on the same GPU; under torchrun each rank "
            "uses cuda:LOCAL_RANK: give 'auto' or 'cuda'."
        )


def rank_device(device: str, context: DistributedContext) -> torch.device:
    """The device of this rank for the executor's `device` option: nccl ranks use ``cuda:LOCAL_RANK``
    (for ``auto`` and ``cuda``; a fixed ``cuda:N`` would put every rank on one GPU, so it is refused);
    gloo ranks use the CPU unless the option asks for CUDA."""
    refuse_fixed_cuda_device(device)
    if context.backend == "nccl":
        return context.device
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ConfigurationError("trainer.executor.device: 'cuda' was asked for, but torch sees no CUDA device.")
        refuse_more_ranks_than_gpus(context.local_rank)
        return torch.device("cuda", context.local_rank)
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigurationError(f"trainer.executor.device: expected 'auto', 'cpu' or 'cuda', found {device!r}.")
    return torch.device("cpu")
