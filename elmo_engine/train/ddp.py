"""Data-parallel training with PyTorch's own distributed engine.

Launch with ``torchrun --nproc-per-node N -m elmo_engine.train CORPUS …`` (or across nodes
with ``--nnodes``/``--rdzv-endpoint``). Each process takes ``B / N`` rows of every global batch;
DistributedDataParallel averages the gradients, so the update equals a single process running
the same global batch. The negatives and dropout masks come from a generator that every process
advances identically. Backend: NCCL on GPUs, gloo on CPUs. Without ``WORLD_SIZE`` > 1 nothing
here touches ``torch.distributed``.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import List

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass
class DistContext:
    """Where this process sits: rank among ``world_size`` processes, and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    initialized: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str) -> torch.device:
    """``auto`` → CUDA if available, else CPU; otherwise the named device (checked)."""
    from elmo_engine.errors import InputError

    if name in ("auto", None):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise InputError(f"unknown device {name!r}; use cpu, cuda, cuda:N or auto") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {name!r} asked for, but CUDA is not available here")
    return dev


def setup(device: str = "auto") -> DistContext:
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dev = resolve_device(device)
    if world <= 1:
        return DistContext(device=dev)
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dev.type == "cuda":
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        # generous timeout: the other processes wait while the first evaluates the dev set
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo",
                                timeout=datetime.timedelta(hours=2))
    return DistContext(rank=rank, world_size=world, local_rank=local, device=dev,
                       initialized=True)


def wrap(model: nn.Module, ctx: DistContext) -> nn.Module:
    if not ctx.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)


def all_mean(t: Tensor, ctx: DistContext) -> Tensor:
    """Average of ``t`` over processes (a copy)."""
    t = t.detach().clone()
    if ctx.distributed:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t /= ctx.world_size
    return t


def all_max(value: float, ctx: DistContext) -> float:
    if not ctx.distributed:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def gather_rows(t: Tensor, ctx: DistContext, dim: int = 1) -> Tensor:
    """Concatenate every process's rows of ``t`` along ``dim`` (in rank order)."""
    if not ctx.distributed:
        return t
    parts: List[Tensor] = [torch.empty_like(t) for _ in range(ctx.world_size)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim)


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()


def broadcast_flag(flag: bool, ctx: DistContext) -> bool:
    """True on every process if it was true on any (used to stop all processes together)."""
    if not ctx.distributed:
        return flag
    t = torch.tensor([1 if flag else 0], device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def cleanup(ctx: DistContext) -> None:
    if ctx.initialized and dist.is_initialized():
        dist.destroy_process_group()
