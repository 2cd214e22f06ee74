"""Choices a key times on the GPU (the cut by keys, balanced_runs' timed layout), kept per
process so that a key built again for the same mask and shapes costs no second timing.

Every rank of a process group builds the group's keys in the same order, so all of them hit or
miss alike and evict alike; a lone miss would start a timing whose collectives the other ranks
never join. Hence one store per group (its global ranks) and first-in, first-out eviction, which
depends on that order alone.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import torch.distributed as dist

T = TypeVar("T")


def group_ranks(group) -> tuple[int, ...]:
    """The global ranks of ``group`` (None: the world; () outside torch.distributed)."""
    if not dist.is_initialized():
        return ()
    return tuple(dist.get_process_group_ranks(group or dist.group.WORLD))


class GroupChoices:
    """At most ``max_per_group`` timed choices per process group, oldest evicted first."""

    def __init__(self, max_per_group: int = 256) -> None:
        if max_per_group < 1:
            raise ValueError(f"max_per_group must be >= 1, got {max_per_group}")
        self.max_per_group = max_per_group
        self._groups: dict[tuple[int, ...], dict[Hashable, object]] = {}

    def get_or_time(self, group, key: Hashable, time: Callable[[], T]) -> T:
        """The choice kept under ``key`` for ``group``, or ``time()`` kept there."""
        chosen = self._groups.setdefault(group_ranks(group), {})
        if key not in chosen:
            if len(chosen) >= self.max_per_group:
                del chosen[next(iter(chosen))]
            chosen[key] = time()
        return chosen[key]  # type: ignore[return-value]


__all__ = ["GroupChoices", "group_ranks"]
