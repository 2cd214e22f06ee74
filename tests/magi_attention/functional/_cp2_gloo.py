"""What the 2-rank gloo tests of the fused backward share: the inputs (bf16, the reference
kernel's sizes), a key per mask, the gradients of one step, and the spawn of the two ranks."""
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

SEQLEN = 256
HEADS = (4, 2)
HEAD_DIM = 16
DOC_LENS = [64, 32, 96, 64]


def inputs():
    """(q, k, v, dout), global, bf16."""
    from magi_attention.testing import random_qkv
    q, k, v = (t.bfloat16() for t in random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0,
                                                 requires_grad=False))
    dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM,
                       generator=torch.Generator().manual_seed(1)).bfloat16()
    return q, k, v, dout


def key_for(name: str, overlap):
    """The reference-kernel key of the test mask ``name`` at cp 2 (chunks of 32, min_heap)."""
    from magi_attention.api import magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    from magi_attention.testing.masks import named_mask
    slices = named_mask(name, SEQLEN, doc_lens=DOC_LENS, seed=1)
    return magi_attn_flex_key(*slices_to_tensors(slices), SEQLEN, *HEADS, HEAD_DIM,
                              dist.group.WORLD, chunk_size=32, dispatch_alg="min_heap",
                              overlap=overlap, backend="reference", dtype=torch.bfloat16)


def grads(key, local, dout_local):
    """(dq, dk, dv) of one calc_attn step on this rank's shards."""
    from magi_attention.api import calc_attn
    leaves = [t.detach().clone().requires_grad_() for t in local]
    out, _ = calc_attn(*leaves, key)
    return torch.autograd.grad(out, leaves, dout_local)


def bitwise_diffs(what: str, got, want) -> list[str]:
    """One line per gradient of (dq, dk, dv) ``got`` that is not bf16 and bit for bit ``want``."""
    return [f"{what} {label}: {a.dtype}, max diff {(a.float() - b.float()).abs().max().item():.3e}"
            for label, a, b in zip(("dq", "dk", "dv"), got, want)
            if a.dtype != torch.bfloat16 or not torch.equal(a, b)]


def _worker(rank, check, init_file, outs):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
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


def run_on_two_ranks(check) -> str:
    """``check(rank) -> [error lines]`` on 2 gloo ranks; every rank's errors, joined. A rank that
    dies by a signal after both ranks wrote their findings died in teardown, after the check:
    that is a warning, not a failure (the findings are read as usual)."""
    with tempfile.TemporaryDirectory() as d:
        outs = [os.path.join(d, f"out.{r}") for r in range(2)]
        try:
            mp.spawn(_worker, args=(check, os.path.join(d, "store"), outs), nprocs=2)
        except mp.ProcessExitedException as e:
            if e.signal_name is None or not all(os.path.exists(o) for o in outs):
                raise
            warnings.warn(f"a gloo rank died in teardown, after the check: {e}")
        return "\n".join(Path(o).read_text() for o in outs).strip()
