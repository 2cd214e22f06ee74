"""Largest item first into the lightest bucket that still has room (LPT with a count limit)."""
from __future__ import annotations

import heapq

import numpy as np


def greedy_fill(item_areas: np.ndarray, num_buckets: int, items_per_bucket: int) -> list[list[int]]:
    order = np.argsort(-item_areas, kind="stable")  # ties keep the original order: deterministic
    heap = [(0, r) for r in range(num_buckets)]      # (bucket area, bucket id); id breaks ties
    buckets: list[list[int]] = [[] for _ in range(num_buckets)]
    for item in order.tolist():
        area, r = heapq.heappop(heap)
        buckets[r].append(item)
        if len(buckets[r]) < items_per_bucket:
            heapq.heappush(heap, (area + int(item_areas[item]), r))
    return buckets
