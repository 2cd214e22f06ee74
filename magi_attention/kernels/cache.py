"""The bounded caches of the kernel backends: per-mask work (plans, FA4 conversions) done once."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

import torch

V = TypeVar("V")


class LRUCache:
    """A mapping of at most ``max_size`` entries that evicts the least recently used one."""

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.max_size = max_size
        self._entries: OrderedDict = OrderedDict()

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The cached value of ``key``, or ``build()`` stored under it."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = build()
        self._entries[key] = value
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def ranges_key(q_ranges: torch.Tensor, k_ranges: torch.Tensor,
               attn_type_map: torch.Tensor) -> tuple[bytes, bytes, bytes]:
    """A hashable identity of a mask given as the FFA range tensors (their host bytes)."""
    return tuple(t.cpu().numpy().tobytes() for t in (q_ranges, k_ranges, attn_type_map))
