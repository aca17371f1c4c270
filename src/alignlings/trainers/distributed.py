"""Multi-process data parallelism (DDP) for the trainers: setup, wrapping and the few collectives used.

Launched with ``torchrun --nproc_per_node N`` every process runs the same trainer; torchrun sets
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``. We start the process group with gloo on the CPU and
nccl on GPUs, wrap the policy in ``DistributedDataParallel`` (which averages gradients over
processes during backward) and give each process its own slice of every global batch. A plain
``python`` launch is world size 1 and nothing here does anything.
"""

from __future__ import annotations

import atexit
import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Process 0 writes logs, checkpoints and the final model."""
        return self.rank == 0


def setup_distributed(use_cpu: bool = False) -> DistInfo:
    """Read torchrun's environment, start the process group once, pick this process's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available() and not use_cpu
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        # Tear the group down before the interpreter does: a process group left to C++ static
        # destructors at exit can abort ("terminate called without an active exception").
        atexit.register(_destroy_process_group)
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=device)


def _destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        gc.collect()  # DDP wrappers still in reference cycles go first (see shutdown)
        dist.destroy_process_group()


def shutdown() -> None:
    """End the process group at the end of a run, after the caller has dropped its trainers.

    Destroying the group while a ``DistributedDataParallel`` wrapper is alive can hang at exit: the
    wrapper's Reducer is torn down later, by the garbage collector or the interpreter, while gloo's
    worker thread is being joined (a known torch deadlock; one two-process run in eight hung for
    minutes). So: collect garbage (a freed trainer and its wrapper may sit in reference cycles), pass
    a barrier (no process is still inside a collective), then destroy. Nothing when not distributed."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def wrap_model(model: torch.nn.Module, info: DistInfo, *, find_unused_parameters: bool = False) -> torch.nn.Module:
    """DDP-wrap ``model`` when there is more than one process; DDP broadcasts rank 0's weights.

    ``find_unused_parameters``: set it when some trainable parameters get no gradient (a reward
    model on a causal LM never uses an untied LM head); DDP would otherwise wait for them forever.
    """
    if info.world_size == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [info.device.index] if info.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=find_unused_parameters)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t`` over processes (a copy; ``t`` itself on one process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return t
    t = t.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_cat(t: torch.Tensor) -> torch.Tensor:
    """Concatenate equally shaped ``t`` from every process along dim 0, in rank order."""
    if not (dist.is_available() and dist.is_initialized()):
        return t
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0)


def mean_over_processes(metrics: dict[str, float], device: torch.device) -> dict[str, float]:
    """Average each metric over processes (one all-reduce for all of them)."""
    if not (dist.is_available() and dist.is_initialized()) or not metrics:
        return metrics
    keys = sorted(metrics)
    values = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64, device=device)
    values = all_reduce_sum(values) / dist.get_world_size()
    return dict(zip(keys, values.tolist()))


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
