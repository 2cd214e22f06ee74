"""The backward cut by keys sends the received keys' dK/dV to their owners before the own keys'
kernel runs, so the reduce travels while that kernel computes (2 gloo processes, reference
kernel, cp 2): the call order, and gradients bit for bit equal to the same cut run with every
collective waited for at once (overlap off: the reduce after the own keys' kernel)."""
import os
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SEQLEN = 256
HEADS = (4, 2)
HEAD_DIM = 16
MASKS = ("causal", "causal_document")


def _grads(key, local, dout_local):
    from magi_attention.api import calc_attn
    leaves = [t.detach().clone().requires_grad_() for t in local]
    out, _ = calc_attn(*leaves, key)
    return torch.autograd.grad(out, leaves, dout_local)


def _recording(runtime, calls):
    """Wrap the runtime's backward kernel calls and reduce starts to append to ``calls``."""
    bwd, reduce = runtime._bwd, runtime._reduce

    def recorded_bwd(dout, q, k, v, out, lse, attn, backend):
        calls.append("own keys' kernel" if attn is runtime.meta.host else "received keys' kernel")
        return bwd(dout, q, k, v, out, lse, attn, backend)

    def recorded_reduce(partial, out, stage):
        calls.append("reduce started")
        return reduce(partial, out, stage)

    runtime._bwd, runtime._reduce = recorded_bwd, recorded_reduce


def _worker(rank, init_file, out_file):
    from bench.masks import build_mask
    from magi_attention.api import dispatch, magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    from magi_attention.meta import OverlapConfig
    from magi_attention.testing import random_qkv

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    errors = []
    try:
        q, k, v = (t.bfloat16() for t in random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0,
                                                     requires_grad=False))
        dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM,
                           generator=torch.Generator().manual_seed(1)).bfloat16()
        for name in MASKS:
            mask = build_mask(name, SEQLEN, doc_lens=[64, 32, 96, 64], seed=1)
            key = magi_attn_flex_key(*slices_to_tensors(mask.slices), SEQLEN, *HEADS, HEAD_DIM,
                                     dist.group.WORLD, chunk_size=32, dispatch_alg="min_heap",
                                     overlap=OverlapConfig(fused=True, cut="bwd"),
                                     backend="reference", dtype=torch.bfloat16)
            runtime = key.runtime
            if runtime.cut != frozenset({"bwd"}):
                errors.append(f"{name}: the backward is not cut ({sorted(runtime.cut)})")
                continue
            local = [dispatch(t, key) for t in (q, k, v)]
            dout_local = dispatch(dout, key)
            calls = []
            _recording(runtime, calls)
            overlapped = _grads(key, local, dout_local)
            want = ["received keys' kernel", "reduce started", "own keys' kernel"]
            got = [c for c in calls if c in want]
            if runtime.meta.stages[0].window is None:
                want = want[1:]  # no row reads a received key: nothing to compute first
            if got != want:
                errors.append(f"{name} rank {rank}: calls {got}, want {want}")
            runtime.overlap = False
            waited = _grads(key, local, dout_local)
            runtime.overlap = True
            for label, a, b in zip(("dq", "dk", "dv"), overlapped, waited):
                if not torch.equal(a, b):
                    errors.append(f"{name} {label}: overlapped != waited, max diff "
                                  f"{(a.float() - b.float()).abs().max().item():.3e}")
    except Exception:
        errors.append(traceback.format_exc())
    with open(f"{out_file}.{rank}", "w") as f:
        f.write("\n".join(errors))
    # the last reduce is one-way: a rank that only received must not tear the group down while
    # its peer's send is still completing (gloo aborts that process)
    dist.barrier()
    dist.destroy_process_group()


def test_cut_backward_sends_the_received_keys_grads_before_the_own_keys_kernel():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_worker, args=(os.path.join(d, "store"), os.path.join(d, "out")), nprocs=2)
        errors = [open(os.path.join(d, f"out.{r}")).read() for r in range(2)]
    assert not any(errors), "\n".join(errors)
