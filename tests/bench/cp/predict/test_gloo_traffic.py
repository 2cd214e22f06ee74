"""What the predictor says each rank computes and sends equals what the real strategies do.

Four gloo processes run every strategy (and MagiAttention) forward and backward on the same
masks, with torch.distributed's send paths and the local kernels wrapped to count: the bytes
each rank hands to each peer (all_to_all_single's splits, all-gather and reduce-scatter
blocks, every isend of a batch_isend_irecv) and the area and sizes of each local kernel call.
The predictor's programs for the same cells must name exactly those bytes per (rank, peer,
direction) and exactly those calls, in order.
"""
from __future__ import annotations

import functools
import os
import tempfile
from collections import defaultdict

import pytest
import torch
import torch.distributed as dist

from bench.cp import load_strategy
from bench.cp.predict.magi_programs import magi_programs, solve_magi
from bench.cp.predict.ops import Collective, Kernel, P2P
from bench.cp.predict.predictor import _baseline_programs
from bench.cp.predict.problem import CPProblem
from bench.data import sample_doc_lens
from bench.masks import build_mask
from magi_attention.kernels.block_sparse import union_row_intervals
from magi_attention.kernels.plan import FlexAttnPlan
from magi_attention.testing.processes import spawn

WORLD = 4
SEQLEN, HEADS_Q, HEADS_KV, HEAD_DIM = 256, 4, 2, 16
DOC_LENS = tuple(sample_doc_lens(SEQLEN, seed=8, cap_ratio=0.5))
MASKS = ("causal", "causal_document", "full_document")
STRATEGIES = [("ulysses", {}), ("ring_p2p", {}), ("ring_allgather", {}), ("usp", {}),
              ("loongtrain", {}), ("loongtrain", {"head_parallel_degree": 1, "window_size": 2}),
              ("hybrid_cp", {}), ("magi", {"dispatch_alg": "min_heap", "cut": "none"}),
              ("magi", {"dispatch_alg": "sequential", "cut": "none", "num_stages": 2})]


def _area(plan: FlexAttnPlan) -> int:
    _, lo, hi = union_row_intervals(plan.bounds, plan.seqlen_k)
    return int((hi - lo).sum())


class _Counts:
    """Per direction: bytes to each global peer, and the local calls (area, rows, keys, heads)."""

    def __init__(self) -> None:
        self.direction = "fwd"
        self.sent = {"fwd": defaultdict(int), "bwd": defaultdict(int)}
        self.calls = {"fwd": [], "bwd": []}

    def send(self, peer: int, nbytes: int) -> None:
        if nbytes and peer != dist.get_rank():
            self.sent[self.direction][peer] += int(nbytes)

    def call(self, plan: FlexAttnPlan, q) -> None:
        self.calls[self.direction].append((_area(plan), plan.seqlen_q, plan.seqlen_k, q.shape[1]))


def _peer(group, i: int) -> int:
    return i if group is None or group is dist.group.WORLD else dist.get_global_rank(group, i)


def _instrument(counts: _Counts) -> None:
    """Wrap the calls every strategy's traffic and kernels go through (this process only)."""
    import bench.cp._all_gather as all_gather
    import bench.cp._reduce_scatter as reduce_scatter
    import magi_attention.functional._dist_runtime as runtime
    from bench.cp.local_kernel import LocalKernel

    a2a = dist.all_to_all_single

    def all_to_all_single(out, inp, output_split_sizes=None, input_split_sizes=None,
                          group=None, **kw):
        row = inp.element_size() * (inp[0].numel() if inp.shape[0] else 0)
        for i, n in enumerate(input_split_sizes):
            counts.send(_peer(group, i), n * row)
        return a2a(out, inp, output_split_sizes, input_split_sizes, group=group, **kw)

    def wrap_block(fn, scatter: bool):
        """A ring collective: this rank's block (all-gather: its input; reduce-scatter: the
        output it keeps) to every other member."""
        def wrapped(out, inp, group=None, **kw):
            block = out if scatter else inp
            for i in range(dist.get_world_size(group)):
                counts.send(_peer(group, i), block.numel() * block.element_size())
            return fn(out, inp, group=group, **kw)
        return wrapped

    batch = dist.batch_isend_irecv

    def batch_isend_irecv(ops):
        for op in ops:
            if op.op is dist.isend:
                counts.send(op.peer, op.tensor.numel() * op.tensor.element_size())
        return batch(ops)

    dist.all_to_all_single = all_to_all_single
    dist.batch_isend_irecv = batch_isend_irecv
    all_gather._all_gather_tensor = wrap_block(all_gather._all_gather_tensor, False)
    reduce_scatter._reduce_scatter_tensor = wrap_block(reduce_scatter._reduce_scatter_tensor, True)

    fwd, bwd = LocalKernel.fwd, LocalKernel.bwd

    def kernel_fwd(self, q, k, v, mask):
        if len(mask):
            counts.call(mask.plan(q.shape[0], k.shape[0]), q)
        return fwd(self, q, k, v, mask)

    def kernel_bwd(self, dout, q, k, v, out, lse, mask):
        if len(mask):
            counts.call(mask.plan(q.shape[0], k.shape[0]), q)
        return bwd(self, dout, q, k, v, out, lse, mask)

    LocalKernel.fwd, LocalKernel.bwd = kernel_fwd, kernel_bwd
    load_backend = runtime.load_backend

    class Counted:
        def __init__(self, module) -> None:
            self.module = module

        def fwd(self, q, k, v, plan, *args, **kw):
            counts.call(plan, q)
            return self.module.fwd(q, k, v, plan, *args, **kw)

        def bwd(self, dout, q, k, v, out, lse, plan, *args, **kw):
            counts.call(plan, q)
            return self.module.bwd(dout, q, k, v, out, lse, plan, *args, **kw)

    runtime.load_backend = lambda name: Counted(load_backend(name))


def _mask(name: str):
    return build_mask(name, SEQLEN, doc_lens=DOC_LENS)


def _worker(rank: int, store: str, out_path: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        results = {}
        gen = torch.Generator().manual_seed(0)
        for mask_name in MASKS:
            mask = _mask(mask_name)
            q, dout = (torch.randn(SEQLEN, HEADS_Q, HEAD_DIM, generator=gen) for _ in range(2))
            k, v = (torch.randn(SEQLEN, HEADS_KV, HEAD_DIM, generator=gen) for _ in range(2))
            for index, (name, knobs) in enumerate(STRATEGIES):
                counts = _Counts()
                strategy = load_strategy(name)(mask, None, num_heads_q=HEADS_Q,
                                               num_heads_kv=HEADS_KV, **knobs)
                local = [strategy.shard(t) for t in (q, k, v, dout)]
                _instrument(counts)
                try:
                    with torch.no_grad():
                        strategy.attention(*local[:3])
                    ql, kl, vl = (t.detach().requires_grad_() for t in local[:3])
                    counts.direction = "forward for backward"
                    counts.sent["forward for backward"] = defaultdict(int)
                    counts.calls["forward for backward"] = []
                    out = strategy.attention(ql, kl, vl)
                    counts.direction = "bwd"
                    torch.autograd.grad(out, (ql, kl, vl), local[3])
                finally:
                    _restore()
                results[mask_name, index] = ({d: dict(s) for d, s in counts.sent.items()},
                                             counts.calls)
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, results)
        if rank == 0:
            torch.save(gathered, out_path)
    finally:
        dist.destroy_process_group()


_ORIGINALS: dict = {}


def _restore() -> None:
    """Undo _instrument (the next strategy wraps the originals again)."""
    for (owner, name), value in _ORIGINALS.items():
        setattr(owner, name, value)


def _remember() -> None:
    import bench.cp._all_gather as all_gather
    import bench.cp._reduce_scatter as reduce_scatter
    import magi_attention.functional._dist_runtime as runtime
    from bench.cp.local_kernel import LocalKernel
    for owner, name in ((dist, "all_to_all_single"), (dist, "batch_isend_irecv"),
                        (all_gather, "_all_gather_tensor"),
                        (reduce_scatter, "_reduce_scatter_tensor"), (LocalKernel, "fwd"),
                        (LocalKernel, "bwd"), (runtime, "load_backend")):
        _ORIGINALS[owner, name] = getattr(owner, name)


_remember()


@functools.cache
def _measured() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        spawn(_worker, args=(os.path.join(tmp, "store"), os.path.join(tmp, "out.pt")),
                 nprocs=WORLD)
        return torch.load(os.path.join(tmp, "out.pt"), weights_only=False)


def _predicted(name: str, knobs: dict, mask_name: str, direction: str):
    """Per rank: (bytes to each peer, [(area, rows, keys, heads)]) of the predictor's programs."""
    problem = CPProblem(_mask(mask_name), WORLD, HEADS_Q, HEADS_KV, HEAD_DIM, element_size=4)
    if name == "magi":
        solve = solve_magi(problem, "reference", dispatch_alg=knobs["dispatch_alg"],
                           num_stages=knobs.get("num_stages"))
        programs = magi_programs(problem, solve, direction, frozenset())
    else:
        programs = _baseline_programs(name, knobs, problem, direction)
    out = []
    for rank, program in enumerate(programs):
        sent, calls = defaultdict(int), []
        for op in program:
            if isinstance(op, (P2P, Collective)):
                for peer, nbytes in op.sends:
                    if nbytes and peer != rank:
                        sent[peer] += int(nbytes)
            elif isinstance(op, Kernel):
                calls.append((op.area, op.seqlen_q, op.seqlen_k, op.num_heads_q))
        out.append((dict(sent), calls))
    return out


CASES = [pytest.param(mask, i, id=f"{mask}-{name}{''.join(f'-{k}={v}' for k, v in knobs.items())}")
         for mask in MASKS for i, (name, knobs) in enumerate(STRATEGIES)]


@pytest.mark.parametrize("mask_name,index", CASES)
def test_predicted_bytes_and_calls_equal_the_strategy_run(mask_name, index):
    name, knobs = STRATEGIES[index]
    measured = _measured()
    for direction in ("fwd", "bwd"):
        predicted = _predicted(name, knobs, mask_name, direction)
        for rank in range(WORLD):
            sent, calls = measured[rank][mask_name, index]
            want_sent, want_calls = predicted[rank]
            assert sent[direction] == want_sent, (rank, direction, sent[direction], want_sent)
            assert calls[direction] == want_calls, (rank, direction, calls[direction], want_calls)
