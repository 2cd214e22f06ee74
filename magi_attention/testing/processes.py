"""Worker processes for the multi-rank tests, started from a forkserver that has torch and this
library imported already: a rank starts in ~0.1 s instead of the ~3 s a fresh interpreter takes
to import torch (the multi-rank CPU tests start a few hundred ranks in all).

The forkserver is a clean process of its own (not a fork of pytest, with its threads), started
on first use with the preloaded modules, and reused by every later call."""
from __future__ import annotations

import multiprocessing

import torch.multiprocessing as mp

__all__ = ["PRELOAD", "spawn"]

PRELOAD = ["torch", "torch.distributed", "magi_attention.api", "magi_attention.functional",
           "magi_attention.testing.dense"]
_preload_set = False


def spawn(fn, args: tuple = (), nprocs: int = 1, join: bool = True):
    """``torch.multiprocessing.spawn`` (``fn(rank, *args)`` in ``nprocs`` processes; a worker's
    exception is raised here) from the preloaded forkserver."""
    global _preload_set
    if not _preload_set:
        multiprocessing.set_forkserver_preload(PRELOAD)
        _preload_set = True
    return mp.start_processes(fn, args=args, nprocs=nprocs, join=join,
                              start_method="forkserver")
