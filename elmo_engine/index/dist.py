"""Where this process sits when ``torchrun`` launched it: rank, world size, a barrier.

``torchrun --nproc-per-node N elmo-explorer index …`` (or ``python -m torch.distributed.run``)
starts N copies of the command; each reads ``RANK``/``WORLD_SIZE`` from the environment, joins a
gloo process group (CPU processes; the barrier needs nothing faster) and embeds the shards ``k``
with ``k % world_size == rank`` on its own device (``cuda:LOCAL_RANK`` when CUDA is there).
Nodes join with ``torchrun --nnodes M --node-rank R --rdzv-endpoint HOST:PORT`` (see
docs/guide/corpus-index.md). Without ``WORLD_SIZE`` > 1 nothing here touches
``torch.distributed``.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup() -> Ranks:
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Ranks()
    import torch.distributed as dist

    if not dist.is_initialized():
        # generous: the slowest rank may embed for hours while the others wait at the barrier
        dist.init_process_group(backend="gloo", timeout=datetime.timedelta(hours=12))
    return Ranks(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))


def barrier(ranks: Ranks) -> None:
    if ranks.distributed:
        import torch.distributed as dist

        dist.barrier()


def all_ok(ranks: Ranks, ok: bool) -> bool:
    """True when ``ok`` is true on every rank (a failed rank stops the others cleanly)."""
    if not ranks.distributed:
        return ok
    import torch
    import torch.distributed as dist

    t = torch.tensor([0 if ok else 1], dtype=torch.int64)
    dist.all_reduce(t)
    return int(t.item()) == 0


def cleanup(ranks: Ranks) -> None:
    if ranks.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
