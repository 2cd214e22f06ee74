"""The correctness gate: before a kernel or a CP strategy is timed on a cell, its output and its
gradients must match FFA's pure-torch reference backend (fp32) on the same inputs, at every
seqlen. Used by both sweeps (``bench.kernels.runner``, ``bench.cp.runner``) and by
``bench.cp.verify``.

    rows = gate_rows(seqlen, rows=256, full_max_seqlen=2048, seed=0)
    restrict_dout(inputs, rows)                  # before the kernel copies the inputs
    ref = reference(mask, shapes, inputs, rows)
    result = compare(ref, out, (dq, dk, dv), shapes.dtype)
    result.status("bwd"), result.message("bwd")  # "ok" | "wrong", and why

Why a few rows suffice for the gradients too: with ``dout`` zero outside a set R of query rows,
the backward's dS = P * (dP - D) is zero on every other row, so dq is zero there and dk, dv of
the *whole* sequence are sums over the rows of R only. The reference therefore runs on the rows
of R against all keys (``rows x seqlen`` work instead of ``seqlen^2``) and still yields the exact
dk, dv of every key, which the kernel must reproduce. At ``seqlen <= full_max_seqlen`` R is every
row; above, R is ``NUM_ROW_BLOCKS`` blocks of query rows, the last one ending at the sequence end.
The timed backward does not run with the restricted ``dout``: attention kernels do the same
work whatever the values, but not at the same clocks. Multiplying mostly zeros draws less power,
and a power-limited GPU clocks higher: on 2 H200s (MagiAttention on Triton, causal, 64k tokens
a GPU) the backward ran in 651 ms on the restricted dout and 764 ms on the whole one.
So the runners gate on the restricted copy and time with the whole dout
(``bench.problem.make_dout``, ``bench.kernels.base.Prepared.set_dout``).

Error measure: the relative L2 error ``||x - ref|| / ||ref||`` in fp32 (dq over all rows, the
rows outside R against zero), with a bound per input dtype; dk and dv are also compared on
``NUM_KEY_BLOCKS`` sampled blocks of key columns that receive gradient, so an error confined to
a few keys is not averaged away.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from bench.masks import Mask
from bench.problem import Inputs, Shapes
from magi_attention.common import AttnRange, slices_to_tensors
from magi_attention.functional import flex_flash_attn_func

__all__ = ["REL_TOL", "GRAD_TOL_FACTOR", "Reference", "GateResult", "gate_rows", "restrict_dout",
           "reference", "compare", "check_prepared"]

# Relative L2 error bounds. bf16 kernels round P and out to 8 mantissa bits (~4e-3 relative per
# element); a wrong mask on the compared rows gives errors of order 0.1 to 1.
REL_TOL = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 5e-3}
# the backward accumulates over more terms (dk, dv sum over query rows)
GRAD_TOL_FACTOR = 2.0
NUM_ROW_BLOCKS = 4
NUM_KEY_BLOCKS = 4
KEY_BLOCK = 64
# a sampled key block must carry this share of the largest block's gradient norm: blocks that
# receive almost nothing have a norm made of cancellations, where a relative error means little
KEY_BLOCK_MIN_SHARE = 0.1
GRAD_NAMES = ("dq", "dk", "dv")


@dataclass(frozen=True)
class Reference:
    """The reference on the gate's query rows R.

    Attributes:
        rows: int64 query rows of R, sorted.
        out, dq: ``[batch, len(rows), num_heads_q, head_dim]`` fp32 (dq is zero off R).
        dk, dv: ``[batch, seqlen, num_heads_kv, head_dim]`` fp32, every key; None when the
            reference was built without gradients.
    """

    rows: torch.Tensor
    out: torch.Tensor
    dq: torch.Tensor | None
    dk: torch.Tensor | None
    dv: torch.Tensor | None

    @property
    def has_grads(self) -> bool:
        return self.dq is not None


@dataclass(frozen=True)
class GateResult:
    """Errors and bounds of one comparison; ``out`` always, dq/dk/dv when gradients were given."""

    errors: Mapping[str, float]
    tolerances: Mapping[str, float]
    num_rows: int

    @property
    def failed(self) -> tuple[str, ...]:
        """The compared tensors over their bound (NaN counts as over)."""
        return tuple(n for n, e in self.errors.items() if not e <= self.tolerances[n])

    @property
    def grads_checked(self) -> bool:
        return all(n in self.errors for n in GRAD_NAMES)

    def status(self, direction: str) -> str:
        """"ok" or "wrong" for a row of ``direction``: a wrong output condemns both directions,
        a wrong gradient the backward; a backward is never "ok" unless its gradients were checked.
        """
        if direction not in ("fwd", "bwd"):
            raise ValueError(f"direction must be 'fwd' or 'bwd', got {direction!r}")
        if "out" in self.failed:
            return "wrong"
        if direction == "bwd" and (self.failed or not self.grads_checked):
            return "wrong"
        return "ok"

    def message(self, direction: str) -> str:
        if self.status(direction) == "wrong":
            if direction == "bwd" and not self.failed:
                return "gate: gradients not checked"
            name = self.failed[0]
            return (f"gate: {name} rel_err {self.errors[name]:.2e} > {self.tolerances[name]:.0e} "
                    f"on {self.num_rows} rows")
        text = f"gate: out rel_err {self.errors['out']:.1e}"
        if direction == "bwd":
            text += f", grads rel_err <= {max(self.errors[n] for n in GRAD_NAMES):.1e}"
        return f"{text} ({self.num_rows} rows)"


def gate_rows(seqlen: int, *, rows: int, full_max_seqlen: int, seed: int) -> torch.Tensor:
    """The query rows R: all of them at ``seqlen <= full_max_seqlen`` or ``rows >= seqlen``,
    else NUM_ROW_BLOCKS disjoint blocks of ``~rows / NUM_ROW_BLOCKS`` rows, the last ending at S
    (the rows that see the most keys in causal masks)."""
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    if seqlen <= full_max_seqlen or rows >= seqlen:
        return torch.arange(seqlen)
    size = max(1, rows // NUM_ROW_BLOCKS)
    slots = seqlen // size
    rng = np.random.default_rng(seed)
    picks = rng.choice(slots - 1, size=min(NUM_ROW_BLOCKS - 1, slots - 1), replace=False)
    starts = sorted(int(p) * size for p in picks) + [seqlen - size]
    return torch.cat([torch.arange(s, s + size) for s in starts])


def restrict_dout(inputs: Inputs, rows: torch.Tensor) -> None:
    """Zero ``inputs.dout`` outside ``rows`` (in place), so dk, dv depend on those rows only."""
    seqlen = inputs.dout.shape[1]
    if len(rows) == seqlen:
        return
    off = torch.ones(seqlen, dtype=torch.bool, device=inputs.dout.device)
    off[rows.to(off.device)] = False
    inputs.dout[:, off] = 0


def _blocks(rows: torch.Tensor) -> list[tuple[int, int]]:
    """Sorted row indices -> maximal runs [start, end)."""
    values = rows.tolist()
    runs, start = [], values[0]
    for prev, cur in zip(values, values[1:]):
        if cur != prev + 1:
            runs.append((start, prev + 1))
            start = cur
    runs.append((start, values[-1] + 1))
    return runs


def _sub_mask_tensors(slices, seqlen: int, blocks: list[tuple[int, int]], device):
    """``slices`` restricted to the row blocks, with q re-indexed onto the packed rows."""
    full_k = AttnRange(0, seqlen)
    pieces, offset = [], 0
    for start, end in blocks:
        for s in slices:
            pieces += [p.shift(offset - start, 0) for p in s.clip(AttnRange(start, end), full_k)]
        offset += end - start
    return slices_to_tensors(pieces, device=device)


def _head_groups(mask: Mask, shapes: Shapes) -> list[tuple[Sequence, slice, slice]]:
    """(slices, query heads, KV heads): one group for a shared mask, one per KV head otherwise."""
    if mask.head_slices is None:
        return [(mask.slices, slice(None), slice(None))]
    g = shapes.group
    return [(s, slice(h * g, (h + 1) * g), slice(h, h + 1)) for h, s in enumerate(mask.head_slices)]


def reference(mask: Mask, shapes: Shapes, inputs: Inputs, rows: torch.Tensor,
              grads: bool = True) -> Reference:
    """FFA's reference backend in fp32 on the query rows ``rows`` against every key; with
    ``grads``, also dq on those rows and dk, dv of every key for ``dout`` restricted to them.

    Args:
        mask: the cell's mask (shared, or one slice list per KV head).
        shapes: the cell's sizes; inputs: its q, k, v, dout ``[batch, seqlen, heads, head_dim]``
            and sink logits (with a sink, each row's softmax has them: rows stay independent,
            so the gate's rows alone still give exact references).
        rows: sorted int64 query rows, from :func:`gate_rows`.
    """
    device = inputs.q.device
    rows = rows.to(device)
    blocks = _blocks(rows.cpu())
    q = inputs.q[:, rows].float().requires_grad_(grads)
    k = inputs.k.float().requires_grad_(grads)
    v = inputs.v.float().requires_grad_(grads)
    out = torch.zeros_like(q)
    for slices, q_heads, kv_heads in _head_groups(mask, shapes):
        q_ranges, k_ranges, types = _sub_mask_tensors(slices, shapes.seqlen, blocks, device)
        for b in range(shapes.batch):
            o, _ = flex_flash_attn_func(q[b, :, q_heads], k[b, :, kv_heads], v[b, :, kv_heads],
                                        q_ranges, k_ranges, types,
                                        softmax_scale=shapes.softmax_scale, backend="reference",
                                        sink=None if inputs.sink is None
                                        else inputs.sink[:, q_heads].contiguous())
            out[b, :, q_heads] = o
    dq = dk = dv = None
    if grads:
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), inputs.dout[:, rows].float())
    return Reference(rows=rows, out=out.detach(), dq=dq, dk=dk, dv=dv)


NORM_CHUNK_ROWS = 4096


def _norm(x: torch.Tensor) -> float:
    """L2 norm of ``[batch, rows, ...]`` in fp32 chunks of rows, summed in fp64: a whole dq at
    64k tokens would otherwise be upcast in one piece (GBs)."""
    total = 0.0
    for start in range(0, max(x.shape[1], 1), NORM_CHUNK_ROWS):
        total += float(torch.linalg.vector_norm(x[:, start:start + NORM_CHUNK_ROWS].float())) ** 2
    return total ** 0.5


def _rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return _norm(x.float() - ref) / max(_norm(ref), 1e-30)


def _dq_err(dq: torch.Tensor, ref: Reference) -> float:
    """dq over every row: R against the reference, the others against zero (summed chunk by
    chunk, never by subtracting norms: that cancels to noise of ~1e-4 relative in fp32)."""
    off = torch.ones(dq.shape[1], dtype=torch.bool, device=dq.device)
    off[ref.rows] = False
    off_rows = off.nonzero().flatten()
    off_sq = sum(_norm(dq[:, off_rows[i:i + NORM_CHUNK_ROWS]]) ** 2
                 for i in range(0, len(off_rows), NORM_CHUNK_ROWS))
    diff_sq = _norm(dq[:, ref.rows].float() - ref.dq) ** 2 + off_sq
    return diff_sq ** 0.5 / max(_norm(ref.dq), 1e-30)


def _key_blocks(ref_grad: torch.Tensor, seed: int) -> list[tuple[int, int]]:
    """Up to NUM_KEY_BLOCKS blocks of KEY_BLOCK key columns that receive gradient."""
    seqlen = ref_grad.shape[1]
    starts = list(range(0, seqlen, KEY_BLOCK))
    norms = np.array([_norm(ref_grad[:, s:s + KEY_BLOCK]) for s in starts])
    if norms.max(initial=0.0) == 0.0:
        return []
    eligible = np.flatnonzero(norms >= KEY_BLOCK_MIN_SHARE * norms.max())
    rng = np.random.default_rng(seed)
    picks = rng.choice(eligible, size=min(NUM_KEY_BLOCKS, len(eligible)), replace=False)
    return [(starts[i], min(starts[i] + KEY_BLOCK, seqlen)) for i in sorted(picks)]


def _key_err(grad: torch.Tensor, ref_grad: torch.Tensor, blocks) -> float:
    errs = [_rel_err(grad, ref_grad)]
    errs += [_rel_err(grad[:, a:b], ref_grad[:, a:b]) for a, b in blocks]
    return max(errs, key=lambda e: (e != e, e))  # NaN first: it must fail


def compare(ref: Reference, out: torch.Tensor,
            grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, dtype: str,
            seed: int = 0) -> GateResult:
    """Compare a kernel's output (and gradients) with the reference.

    Args:
        ref: from :func:`reference` (with gradients when ``grads`` is given).
        out: ``[batch, seqlen, num_heads_q, head_dim]``, every row (only R is compared).
        grads: (dq, dk, dv) of one backward with the restricted dout, each
            ``[batch, seqlen, heads, head_dim]``; None: output only (the result then says
            "wrong" for a backward).
        dtype: the inputs' dtype name, which picks the bound (``REL_TOL``).
        seed: picks the sampled key blocks.

    Raises:
        ValueError: an unknown dtype, or gradients against a reference without them.
    """
    if dtype not in REL_TOL:
        raise ValueError(f"dtype must be one of {list(REL_TOL)}, got {dtype!r}")
    tol = REL_TOL[dtype]
    errors = {"out": _rel_err(out[:, ref.rows], ref.out)}
    tolerances = {"out": tol}
    if grads is not None:
        if not ref.has_grads:
            raise ValueError("gradients given, but the reference was built with grads=False")
        dq, dk, dv = grads
        blocks = _key_blocks(ref.dk + ref.dv, seed)
        errors.update(dq=_dq_err(dq, ref), dk=_key_err(dk, ref.dk, blocks),
                      dv=_key_err(dv, ref.dv, blocks))
        tolerances.update({n: tol * GRAD_TOL_FACTOR for n in GRAD_NAMES})
    return GateResult(errors=errors, tolerances=tolerances, num_rows=len(ref.rows))


def check_prepared(prepared, ref: Reference, dtype: str, with_grads: bool,
                   seed: int = 0) -> GateResult:
    """Gate a prepared kernel (``bench.kernels.base.Prepared``): one forward, and with
    ``with_grads`` one backward, skipped when the output is already wrong."""
    out = prepared.out_bshd(prepared.fwd())
    result = compare(ref, out, None, dtype, seed)
    if with_grads and result.status("fwd") == "ok":
        prepared.bwd()
        result = compare(ref, out, prepared.grads_bshd(), dtype, seed)
    return result
