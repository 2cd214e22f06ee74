"""Dispatch algorithms, by name: chunks with loads -> buckets (equal counts but for unequal_runs)."""
from __future__ import annotations

from .balanced_runs import BalancedRunsDispatch
from .base import DispatchAlgorithm, DispatchSolution
from .min_heap import MinHeapDispatch
from .sequential import SequentialDispatch
from .sorted_sequential import SortedSequentialDispatch
from .unequal_runs import UnequalRunsDispatch

DISPATCH_ALGORITHMS: dict[str, type[DispatchAlgorithm]] = {
    "min_heap": MinHeapDispatch,
    "sequential": SequentialDispatch,
    "sorted_sequential": SortedSequentialDispatch,
    "balanced_runs": BalancedRunsDispatch,
    "unequal_runs": UnequalRunsDispatch,  # opt-in: ranks hold unequal token counts
}


def get_dispatch_algorithm(name: str | DispatchAlgorithm, kernel: str | None = None
                           ) -> DispatchAlgorithm:
    """The algorithm of that name, for the local kernel ``kernel`` (``for_kernel``)."""
    if isinstance(name, DispatchAlgorithm):
        return name
    if name not in DISPATCH_ALGORITHMS:
        raise ValueError(f"unknown dispatch algorithm {name!r}; expected one of "
                         f"{list(DISPATCH_ALGORITHMS)}")
    return DISPATCH_ALGORITHMS[name].for_kernel(kernel)


__all__ = ["BalancedRunsDispatch", "DISPATCH_ALGORITHMS", "DispatchAlgorithm", "DispatchSolution",
           "MinHeapDispatch", "SequentialDispatch", "SortedSequentialDispatch", "UnequalRunsDispatch",
           "get_dispatch_algorithm"]
