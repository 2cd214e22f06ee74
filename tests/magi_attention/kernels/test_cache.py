"""The kernels' LRU cache: bounded, least recently used evicted, built once per key."""
import pytest
import torch

from magi_attention.kernels.cache import LRUCache, ranges_key


def test_lru_evicts_least_recently_used_and_builds_once():
    cache, builds = LRUCache(2), []

    def build(key):
        builds.append(key)
        return key * 10

    assert cache.get_or_build(1, lambda: build(1)) == 10
    assert cache.get_or_build(2, lambda: build(2)) == 20
    assert cache.get_or_build(1, lambda: build(1)) == 10   # hit: refreshes 1
    cache.get_or_build(3, lambda: build(3))               # evicts 2, the least recent
    assert len(cache) == 2
    cache.get_or_build(1, lambda: build(1))
    cache.get_or_build(2, lambda: build(2))
    assert builds == [1, 2, 3, 2]
    with pytest.raises(ValueError, match="max_size"):
        LRUCache(0)


def test_ranges_key_tells_masks_apart():
    r = torch.tensor([[0, 4]], dtype=torch.int32)
    t = torch.tensor([1], dtype=torch.int32)
    assert ranges_key(r, r, t) == ranges_key(r.clone(), r.clone(), t.clone())
    assert ranges_key(r, r, t) != ranges_key(r, r, torch.tensor([0], dtype=torch.int32))
