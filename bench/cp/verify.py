"""Equality check of a CP strategy against single-device attention, cell by cell.

Every rank builds the same mask and the same global q, k, v, dout (fixed seed); the strategy
shards them, runs attention forward and backward, and unshards out, dq, dk, dv, which are
compared with the oracle on the global tensors by the benchmark's gate (``bench.gate.compare``:
relative L2 error, bound per dtype) on every row. Used by tests/bench/cp (gloo, fp32, dense
fp64 oracle) and tools/device/cp_gpu_check.py (NCCL, bf16, fp32 reference-kernel oracle).
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from bench.gate import Reference, compare, reference
from bench.problem import Inputs, Shapes
from magi_attention.common import to_dense
from magi_attention.testing import dense_attention

from . import load_strategy
from .local_kernel import LocalKernel

GRAD_NAMES = ("out", "dq", "dk", "dv")


@dataclass(frozen=True)
class Cell:
    """One check: a strategy with its knobs on one mask."""

    strategy: str
    mask: str
    knobs: dict = field(default_factory=dict)
    mask_params: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in sorted(self.mask_params.items()))
        mask = f"{self.mask}{{{params}}}" if params else self.mask
        return f"{strategy_label(self.strategy, self.knobs)}-{mask}"


def strategy_label(strategy: str, knobs: dict) -> str:
    """``usp[ulysses_degree=2]``: the strategy and its non-default knobs."""
    text = ",".join(f"{k}={v}" for k, v in sorted(knobs.items()))
    return f"{strategy}[{text}]" if text else strategy


@dataclass(frozen=True)
class Problem:
    """Global sizes and numerics shared by all cells of a run."""

    seqlen: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    doc_lens: tuple[int, ...]
    dtype: str = "float32"
    oracle: str = "dense"  # "dense": fp64 dense_attention; "reference": reference kernel in fp32
    seed: int = 0


def _global_inputs(p: Problem, device) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(p.seed)
    shapes = [(p.seqlen, p.num_heads_q), (p.seqlen, p.num_heads_kv), (p.seqlen, p.num_heads_kv),
              (p.seqlen, p.num_heads_q)]
    dtype = getattr(torch, p.dtype)
    return tuple(torch.randn(*s, p.head_dim, generator=g).to(device=device, dtype=dtype)
                 for s in shapes)


def _grads(fn, q, k, v, dout) -> list[torch.Tensor]:
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v)
    out.backward(dout.to(out.dtype))
    return [out.detach(), q.grad, k.grad, v.grad]


def _oracle(p: Problem, mask, q, k, v, dout) -> Reference:
    """The global out, dq, dk, dv as a gate reference on every row (batch 1)."""
    if p.oracle == "dense":
        dense = to_dense(mask.slices, p.seqlen, device=q.device)
        out, dq, dk, dv = _grads(lambda a, b, c: dense_attention(a, b, c, dense)[0], q, k, v, dout)
        return Reference(rows=torch.arange(p.seqlen, device=q.device), out=out[None],
                         dq=dq[None], dk=dk[None], dv=dv[None])
    shapes = Shapes(1, p.seqlen, p.num_heads_q, p.num_heads_kv, p.head_dim, p.dtype)
    inputs = Inputs(*(t[None] for t in (q, k, v, dout)))
    return reference(mask, shapes, inputs, torch.arange(p.seqlen))


def check_cell(cell: Cell, p: Problem, group=None, kernel: LocalKernel | None = None,
               device="cpu") -> dict[str, Any]:
    """Run one cell on every rank of ``group``. Returns a dict with status ("ok", "mismatch",
    "unsupported" or "error"), message, per-tensor relative errors and bounds (``bench.gate``),
    comm_bytes and notes; the comparison runs on group rank 0 only (other ranks return status "done").
    Collective; an exception on one rank only leaves the others waiting, so callers time out."""
    from bench.masks import UnsupportedMask, build_mask

    kernel = kernel if kernel is not None else LocalKernel()
    row: dict[str, Any] = {"cell": cell.id, "strategy": cell.strategy, "mask": cell.mask,
                           "knobs": dict(cell.knobs), "status": "error", "message": ""}
    try:
        # doc_lens are checked and ignored by the patterns without documents
        mask = build_mask(cell.mask, p.seqlen, doc_lens=p.doc_lens, **cell.mask_params)
        cls = load_strategy(cell.strategy)
        cp_size = dist.get_world_size(group)
        reason = cls.supports(mask, p.num_heads_q, p.num_heads_kv, cp_size, **cell.knobs)
        if reason is not None:
            row.update(status="unsupported", message=reason)
            return row
        q, k, v, dout = _global_inputs(p, device)
        strategy = cls(mask, group, num_heads_q=p.num_heads_q, num_heads_kv=p.num_heads_kv,
                       kernel=kernel, **cell.knobs)
        local = [strategy.shard(t) for t in (q, k, v, dout)]
        start = time.perf_counter()
        results = [strategy.unshard(t) for t in _grads(strategy.attention, *local)]
        row.update(seconds=time.perf_counter() - start, comm_bytes=strategy.comm_bytes(),
                   notes=strategy.notes)
        if dist.get_rank(group) != 0:  # every rank holds the gathered results; one compares
            row.update(status="done", message="compared on rank 0")
            return row
        result = compare(_oracle(p, mask, q, k, v, dout), results[0][None],
                         tuple(g[None] for g in results[1:]), p.dtype)
        row.update(errors=dict(result.errors), tolerances=dict(result.tolerances),
                   status="mismatch" if result.failed else "ok",
                   message=", ".join(f"{n}: rel_err {result.errors[n]:.3g} > tol "
                                     f"{result.tolerances[n]:.3g}" for n in result.failed))
    except UnsupportedMask as e:
        row.update(status="unsupported", message=str(e))
    except Exception as e:  # one bad cell must not stop the others
        row.update(status="error", message=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=6))
    return row


def check_cells(cells: list[Cell], p: Problem, group=None, kernel: LocalKernel | None = None,
                device="cpu") -> list[dict[str, Any]]:
    """``check_cell`` for every cell, in order (collective)."""
    return [check_cell(c, p, group, kernel, device) for c in cells]


def gloo_entry(rank: int, world_size: int, store_path: str, out_path: str, cells: list[Cell],
               p: Problem) -> None:
    """torch.multiprocessing entry point: a gloo group over a FileStore, all cells, rank 0 saves
    the rows to ``out_path`` (torch.save)."""
    torch.set_num_threads(1)  # world_size processes share the CI machine's cores
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world_size), rank=rank,
                            world_size=world_size)
    try:
        rows = check_cells(cells, p)
        if rank == 0:
            torch.save(rows, out_path)
    finally:
        dist.destroy_process_group()
