"""Run a check on a few gloo ranks (CPU processes): the harness of the multi-rank CPU tests."""
from __future__ import annotations

import gc
import os
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from .processes import spawn


def _worker(rank, check, init_file, outs):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=len(outs))
    try:
        errors = check(rank)
    except Exception:
        errors = [traceback.format_exc()]
    part = f"{outs[rank]}.part"
    with open(part, "w") as f:
        f.write("\n".join(errors))
    os.replace(part, outs[rank])  # whole or absent
    # a check's reference cycles (a runtime whose methods it wrapped) hold the group: freed
    # here, the group goes down in destroy_process_group below, not in the interpreter's teardown
    gc.collect()
    # a rank whose last collective only received must not tear the group down while its peer's
    # send is still completing (gloo aborts that process)
    dist.barrier()
    dist.destroy_process_group()
    # what this rank found is on disk: leave without the interpreter's teardown, where a gloo
    # rank aborted once in 20-50 runs (SIGABRT "terminate called without an active exception",
    # or SIGBUS, with no Python frame left on the main thread)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_on_ranks(check, world_size: int = 2) -> str:
    """``check(rank) -> [lines]`` (a picklable, module-level function) on ``world_size`` gloo
    ranks; every rank's lines, joined (an exception in a check becomes its traceback's lines).
    A rank that dies by a signal after every rank wrote its findings died in teardown, after
    the check: that is a warning, not a failure (the findings are read as usual)."""
    with tempfile.TemporaryDirectory() as d:
        outs = [os.path.join(d, f"out.{r}") for r in range(world_size)]
        try:
            spawn(_worker, args=(check, os.path.join(d, "store"), outs), nprocs=world_size)
        except mp.ProcessExitedException as e:
            if e.signal_name is None or not all(os.path.exists(o) for o in outs):
                raise
            warnings.warn(f"a gloo rank died in teardown, after the check: {e}")
        return "\n".join(Path(o).read_text() for o in outs).strip()
