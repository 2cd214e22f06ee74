"""DistAttnRuntime: one rank's multi-stage forward and backward over its runtime meta.

Forward: stage 1's remote KV is group-cast (on a side stream on CUDA) while the host stage
computes; stage j + 1 is prefetched while stage j computes; partial outputs merge by lse.
Backward: the same KV prefetch, and the partial dK/dV of stage j is group-reduced to its owners
while stage j + 1 computes. dQ stays local. On gloo / CPU the same code runs with async work
handles, so the overlap logic is what CI tests.
"""
from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import torch

from ..comm import (group_cast, group_reduce, hier_group_cast, hier_group_reduce,
                    range_copy_stacked_, ranges_to_index)
from ..comm.stream_flag import new_flag, stream_flag_reason, write_flag
from ..common import handles
from ..meta import DistAttnRuntimeMeta, StageAttnArgs
from ._backends import backend_for, load_backend
from .merge import merge_out_lse


def _gather(buf: torch.Tensor, copies) -> torch.Tensor:
    """The pieces ``buf[dst:dst + m]`` of (src, dst, m) copies, in src order: one slice (no copy)
    when there is one piece."""
    if len(copies) == 1:
        return buf[copies[0][1]:copies[0][1] + copies[0][2]]
    if not copies:
        return buf[:0]
    return torch.cat([buf[dst:dst + m] for _, dst, m in copies])


def _named(device) -> torch.device:
    """``device`` as tensors on it name it ("cuda" -> "cuda:<current>"), for caches by name."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


class _CopyInto:
    """A work handle whose result is copied into a given buffer on wait (for casts that
    allocate their own)."""

    def __init__(self, handle, out: torch.Tensor) -> None:
        self._handle, self._out = handle, out

    def wait(self) -> torch.Tensor:
        self._out.copy_(self._handle.wait())
        return self._out


class _Done:
    """A finished collective's result behind the work-handle interface (overlap off)."""

    def __init__(self, result) -> None:
        self._result = result

    def wait(self):
        return self._result


class DistAttnRuntime:
    """Holds the meta, the process group, the kernel choice and the comm stream of one rank."""

    def __init__(self, meta: DistAttnRuntimeMeta, group=None, softmax_scale: float | None = None,
                 softcap: float = 0.0, backend: str = "auto", deterministic: bool = False,
                 hier_stages: tuple | None = None, hier_groups: tuple | None = None) -> None:
        """hier_stages (HierCastArgs per stage) and hier_groups (inter, intra) switch the
        group collectives to the two-hop ones of a 2D mesh; results are identical.
        deterministic: the backward kernels' ordered mode and group_reduce's source-rank-order
        sum, so forward and backward are bitwise repeatable from run to run."""
        if (hier_stages is None) != (hier_groups is None):
            raise ValueError("hier_stages and hier_groups go together")
        if hier_stages is not None and len(hier_stages) != meta.num_stages:
            raise ValueError(f"{len(hier_stages)} hierarchical stages for {meta.num_stages} stages")
        self.hier_stages, self.hier_groups = hier_stages, hier_groups
        self.meta = meta
        self.group = group
        self.softmax_scale = softmax_scale
        self.softcap = softcap
        self.backend = backend
        self.deterministic = deterministic
        # False: every collective is waited for as soon as it is issued (nothing overlaps);
        # a benchmark times both to measure how much communication the stages hide
        self.overlap = True
        # directions ("fwd", "bwd") whose fused stage runs cut by keys: one kernel over the own
        # keys (the forward's while the cast is in flight), one over the received keys, merged
        # (OverlapConfig.cut; chosen at key time, see magi_attention.api._tune_cut)
        self.cut: frozenset[str] = frozenset()
        # what chose it where it was timed: {direction: (whole s, cut s)}, the slowest rank's
        self.cut_seconds: dict[str, tuple[float, float]] | None = None
        # each layout's per-rank kernel seconds where balance="timed" moved the cuts
        self.balance_seconds: list[list[float]] | None = None
        # dispatch_alg="timed": {candidate: forward + backward s, the slowest rank's} (api's
        # _tune_dispatch)
        self.dispatch_seconds: dict[str, float] | None = None
        # directions whose fused stage runs cut by rows where the meta has a split
        # (OverlapConfig.split); the other direction runs the fused stage whole
        self.split: frozenset[str] = frozenset({"fwd", "bwd"})
        # the fused forward's Gluon kernel launched before the cast has landed: its programs
        # run the q tiles that read no received key first and wait on a flag, set by the
        # collectives' stream once the keys are in, only where they reach one
        # (gluon_forward.Arrival). Turned on and planned by enable_early_start (the key does
        # it for OverlapConfig(early_start=True)), whose answer early_start_note keeps: why it
        # does not apply on this rank, None where it does. 2 H100s, Triton 16k cp 2:
        # causal_document's forward faster in every run, the masks where one rank could not take
        # it inconclusive; off until an H200 run says more
        self.early_start = False
        self.early_start_note: str | None = "early_start is off"
        # the forwards beside a collective in flight run the Gluon forward's dynamic grid
        # (OverlapConfig.dynamic_grid; set by the key before it times its cut)
        self.dynamic_grid = False
        self._arrivals: dict = {}
        self._own_index: dict = {}
        self._streams: dict = {}
        handles.register(self)  # the custom ops (torch.compile) reach it by id(runtime)

    def resolved_backend(self, q: torch.Tensor, k: torch.Tensor | None = None) -> str:
        """The FFA backend this runtime runs for inputs like ``q`` (the one policy of
        ``magi_attention.functional.resolve_backend``; decided once per dtype/head_dim/device)."""
        return backend_for(self.backend, q, k)

    def prepare(self, device, head_dim: int, dtype: torch.dtype, num_heads_q: int = 1,
                num_heads_kv: int = 1) -> str:
        """Resolve the backend and build every stage's kernel plan now (key time), so that no
        call does host work or synchronises. Returns the backend name."""
        probe_q = torch.empty(1, num_heads_q, head_dim, dtype=dtype, device=device)
        probe_k = torch.empty(1, num_heads_kv, head_dim, dtype=dtype, device=device)
        name = self.resolved_backend(probe_q, probe_k)
        module = load_backend(name)
        fused = (self.meta.fused,) if self.meta.fused is not None else ()
        split = self.meta.fused_split.stage_args() if self.meta.fused_split is not None else ()
        # a window of every row is the stage's own args: planned once (the plan is cached)
        windows = tuple(s.window.attn for s in self.meta.stages if s.window is not None)
        for attn in (self.meta.host, *(stage.attn for stage in self.meta.stages), *fused, *split,
                     *windows):
            attn.plan.tensors(device)
            if attn.num_slices and hasattr(module, "prepare"):
                module.prepare(attn.plan, head_dim, torch.device(device),
                               group=num_heads_q // max(num_heads_kv, 1))
        # the row indices the calls move tokens by, on the device now: the casts' sent rows
        # and, where the fused stage runs, the own KV's rows in the shard and in its buffer
        # (cached by the device's name, so "cuda" is named as the tensors will name it)
        device = _named(device)
        for stage in self.meta.stages:
            stage.cast.send_index(device)
        if self.meta.fused is not None:
            for side in ("local", "buffer"):
                self._own_rows(device, side)
        return name

    def _stream(self, device: torch.device, role: str = "comm"):
        """This rank's side stream for ``role`` ("comm": the collectives; "blocks": the row
        split's remote blocks), or None off CUDA."""
        if device.type != "cuda":
            return None
        key = (device.index if device.index is not None else torch.cuda.current_device(), role)
        if key not in self._streams:
            self._streams[key] = torch.cuda.Stream(device=device)
        return self._streams[key]

    def _cast(self, kv, stage: int, out: torch.Tensor | None = None):
        """Group-cast stage ``stage``'s remote ranges of ``kv``: a tensor, or (k, v), gathered
        straight into one k|v send buffer on the collectives' side stream."""
        if self.hier_stages is not None:
            if not isinstance(kv, torch.Tensor):  # the two-hop cast sends a stacked buffer
                kv = torch.cat(kv, dim=1)
            if out is not None:  # the two-hop cast allocates its own buffer
                buf = hier_group_cast(kv, self.hier_stages[stage], *self.hier_groups,
                                      self._stream(kv.device))
                return _CopyInto(buf, out)
            return hier_group_cast(kv, self.hier_stages[stage], *self.hier_groups,
                                   self._stream(kv.device))
        device = kv.device if isinstance(kv, torch.Tensor) else kv[0].device
        return group_cast(kv, self.meta.stages[stage].cast, self.group, self._stream(device),
                          out=out)

    def _reduce(self, partial: torch.Tensor, out, stage: int):
        """Group-reduce stage ``stage``'s ``partial`` into ``out``: one accumulator, or
        (dk, dv) where the plain group_reduce can add into them (``reduces_in_place``)."""
        if self.hier_stages is not None:
            return hier_group_reduce(partial, out, self.hier_stages[stage], *self.hier_groups,
                                     self._stream(out.device),
                                     deterministic=self.deterministic)
        return group_reduce(partial, out, self.meta.stages[stage].cast, self.group,
                            self._stream(partial.device), deterministic=self.deterministic)

    @property
    def reduces_in_place(self) -> bool:
        """Whether the fused backward may add the returned partial dK/dV straight into the own
        part's dk, dv (each own token sent to one rank: one partial a row, rounded once, as the
        fp32 accumulator path gives), instead of an fp32 copy of the own part and back."""
        return self.hier_stages is None and self.meta.stages[0].cast.sends_each_token_once

    def _scale(self, q: torch.Tensor) -> float:
        return 1.0 / math.sqrt(q.shape[-1]) if self.softmax_scale is None else self.softmax_scale

    # The stage kernels are called through the backend module with each stage's FlexAttnPlan
    # (validated and planned at key time): no host work and no device sync per call, which
    # would stall the prefetch pipeline. The public API checked shapes once, in _check.
    def _fwd(self, q, k, v, attn: StageAttnArgs, backend: str, beside_comm: bool = False):
        """(out, lse) of one stage's slices; ``beside_comm``: a collective is in flight while
        it runs (the dynamic grid then, where ``dynamic_grid`` asks for it)."""
        if attn.num_slices == 0:
            return (torch.zeros(q.shape, dtype=torch.float32, device=q.device),
                    torch.full(q.shape[:2], -math.inf, device=q.device))
        extra = ({"dynamic": True} if beside_comm and self.dynamic_grid and backend == "triton"
                 and self.overlap else {})
        out, lse, _ = load_backend(backend).fwd(q, k, v, attn.plan, self._scale(q),
                                                self.softcap, False, **extra)
        return out, lse

    def _bwd(self, dout, q, k, v, out, lse, attn: StageAttnArgs, backend: str):
        """(dq, dk, dv) of one stage's slices (dq None where there are none)."""
        if attn.num_slices == 0:
            return None, torch.zeros_like(k), torch.zeros_like(v)
        return load_backend(backend).bwd(dout, q, k, v, out, lse, attn.plan, self._scale(q),
                                         self.softcap, self.deterministic)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Local q, k, v [shard_seqlen, heads, head_dim] -> (out in q.dtype, lse fp32)."""
        return self.forward_saving(q, k, v)[:2]

    def forward_saving(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """(out, lse, kv_saved): ``forward`` plus, where the fused stage ran, what ``backward``
        takes instead of casting the remote KV again: the fused KV buffer, or the received KV
        alone where the backward is cut by keys (else None)."""
        self._check(q, k, v)
        backend = self.resolved_backend(q, k)
        stages = self.meta.stages
        if not stages:  # cp 1, or a rank that needs no remote KV: the local kernel alone
            return (*self._fwd(q, k, v, self.meta.host, backend), None)
        if self.meta.fused_split is not None and "fwd" in self.split:
            return self._split_forward(q, k, v, backend)
        if self.meta.fused is not None:
            # (overlap and cut may change after the key is built: checked per call)
            early = self.early_start and self.overlap and not self.cut
            arrival = self._arrival(q, k, backend) if early else None
            if arrival is not None:
                return self._early_forward(q, k, v, backend, arrival)
            return self._fused_forward(q, k, v, backend)
        num_heads_kv = k.shape[1]
        kv = (k, v)
        pending = self._issue(self._cast(kv, 0))
        out, lse = self._fwd(q, k, v, self.meta.host, backend, beside_comm=True)
        for j, stage in enumerate(stages):
            buf = pending.wait()
            pending = self._issue(self._cast(kv, j + 1)) if j + 1 < len(stages) else None
            o, l = self._fwd(q, buf[:, :num_heads_kv], buf[:, num_heads_kv:], stage.attn, backend,
                             beside_comm=pending is not None)
            # partial sums stay fp32; the last merge writes q's dtype directly (one pass fewer)
            last = j + 1 == len(stages)
            out, lse = merge_out_lse(out, lse, o, l, q.dtype if last else torch.float32)
        return out, lse, None

    def backward(self, dout, q, k, v, out, lse, kv_all: torch.Tensor | None = None):
        """Gradients (dq, dk, dv) of the local shard, from the global merged out / lse
        (``kv_all``: the forward's fused KV buffer, if it kept one)."""
        backend = self.resolved_backend(q, k)
        stages = self.meta.stages
        dout = dout.contiguous()
        if not stages:
            dq, dk, dv = self._bwd(dout, q, k, v, out, lse, self.meta.host, backend)
            return (torch.zeros_like(q) if dq is None else dq), dk, dv
        if self.meta.fused_split is not None and "bwd" in self.split:
            return self._split_backward(dout, q, k, v, out, lse, backend, kv_all)
        if self.meta.fused is not None and "bwd" in self.cut:
            return self._cut_backward(dout, q, k, v, out, lse, backend, kv_all)
        if self.meta.fused is not None:
            return self._fused_backward(dout, q, k, v, out, lse, backend, kv_all)
        num_heads_kv = k.shape[1]
        kv = (k, v)
        pending = self._issue(self._cast(kv, 0))
        dq_h, dk_h, dv_h = self._bwd(dout, q, k, v, out, lse, self.meta.host, backend)
        # fp32 accumulators, started from the host stage's result (no zero fill + add pass)
        dq = (torch.zeros(q.shape, dtype=torch.float32, device=q.device) if dq_h is None
              else dq_h.float())
        dkv = torch.cat([dk_h, dv_h], dim=1).float()
        reducing = None
        for j, stage in enumerate(stages):
            buf = pending.wait()
            pending = self._issue(self._cast(kv, j + 1)) if j + 1 < len(stages) else None
            dq_j, dk_j, dv_j = self._bwd(dout, q, buf[:, :num_heads_kv], buf[:, num_heads_kv:],
                                         out, lse, stage.attn, backend)
            if dq_j is not None:
                dq.add_(dq_j)
            if reducing is not None:
                reducing.wait()
            reducing = self._issue(self._reduce(torch.cat([dk_j, dv_j], dim=1), dkv, j))
        if reducing is not None:
            reducing.wait()
        return (dq.to(q.dtype), dkv[:, :num_heads_kv].to(k.dtype),
                dkv[:, num_heads_kv:].to(v.dtype))

    def _issue(self, handle):
        """The handle itself (overlapped), or, with overlap off, its result at once."""
        return handle if self.overlap else _Done(handle.wait())

    def _fused_kv(self, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The fused KV buffer, own part and received part in place."""
        kv_all, landing = self._fused_kv_start(k, v)
        landing()
        return kv_all

    def _fused_forward(self, q, k, v, backend: str):
        """The fused stage's forward: one kernel over the fused KV buffer, or, cut by keys, the
        own keys' kernel while the cast is in flight, then the received keys', merged by lse."""
        h, cut = k.shape[1], self.cut
        if cut >= {"fwd", "bwd"}:  # no fused buffer needed at all
            pending = self._issue(self._cast((k, v), 0))
            out, lse = self._fwd(q, k, v, self.meta.host, backend, beside_comm=True)
            recv = pending.wait()
            kv_all = None
        else:
            kv_all, landing = self._fused_kv_start(k, v)
            if "fwd" in cut:
                out, lse = self._fwd(q, k, v, self.meta.host, backend, beside_comm=True)
            recv = landing()
        if "fwd" in cut:
            out, lse = self._merge_received(q, recv[:, :h], recv[:, h:], out, lse, backend)
        else:
            out, lse = self._fwd(q, kv_all[:, :h], kv_all[:, h:], self.meta.fused, backend)
        return out, lse, (recv if "bwd" in cut else kv_all)

    def _early_forward(self, q, k, v, backend: str, arrival):
        """The fused forward launched while the cast is in flight (``early_start``): after the
        launch, the collectives' stream waits for the cast and sets the arrival flag; this
        stream then waits for that stream (so what follows, e.g. the backward, sees the
        landed buffer) and zeroes the flag for the next call."""
        h = k.shape[1]
        kv_all, landing = self._fused_kv_start(k, v)
        out, lse, _ = load_backend(backend).fwd(q, kv_all[:, :h], kv_all[:, h:],
                                                self.meta.fused.plan, self._scale(q),
                                                self.softcap, False, arrival=arrival)
        main, comm = torch.cuda.current_stream(q.device), self._stream(q.device)
        with torch.cuda.stream(comm):
            landing()  # the cast lands in place (early_start_reason): nothing to copy
            write_flag(arrival.flag, 1, comm)
        main.wait_stream(comm)
        write_flag(arrival.flag, 0, main)
        return out, lse, kv_all

    def enable_early_start(self, device, head_dim: int, dtype: torch.dtype, num_heads_q: int,
                           num_heads_kv: int) -> str | None:
        """Turn ``early_start`` on and plan it now (key time) for inputs of this kind; returns
        why it does not apply to this rank's fused forward (None: it does)."""
        self.early_start = True
        q = torch.empty(1, num_heads_q, head_dim, dtype=dtype, device=device)
        k = torch.empty(1, num_heads_kv, head_dim, dtype=dtype, device=device)
        reason = self.early_start_reason(q, k)
        if reason is None and self._arrival(q, k, self.resolved_backend(q, k)) is None:
            reason = "the fused mask does not run the Gluon forward"
        self.early_start_note = reason
        return reason

    def early_start_reason(self, q: torch.Tensor, k: torch.Tensor,
                           backend: str | None = None) -> str | None:
        """Why the fused forward cannot start before the cast lands here (None: it does)."""
        if not self.early_start:
            return "early_start is off"
        if self.meta.fused is None or self.meta.fused.num_slices == 0:
            return "no fused stage"
        if self.cut or (self.meta.fused_split is not None and "fwd" in self.split):
            return "the fused stage runs cut"
        if not self.overlap or self.hier_stages is not None:
            return "the cast must be in flight, in place (overlap on, the one-hop cast)"
        # nothing but the flag's write may come between the forward's launch and the flag: a
        # copy of received pieces into place, by a kernel or by the copy engines, waits for the
        # spinning forward under one hardware queue (a deadlock either way)
        if self.meta.fused_layout.recv_at is None:
            return "the cast lands in several regions of the fused buffer"
        reason = stream_flag_reason(q.device)
        if reason is not None:
            return reason
        # under several hardware queues the cast's kernel may queue behind the forward, whose
        # waiting programs would then hold the SMs it needs
        if os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
            return "needs CUDA_DEVICE_MAX_CONNECTIONS=1 (kernels reach the GPU in launch order)"
        if (backend or self.resolved_backend(q, k)) != "triton":
            return "only the Triton backend's Gluon forward waits for arriving keys"
        return None

    def _arrival(self, q: torch.Tensor, k: torch.Tensor, backend: str):
        """The fused forward's gluon_forward.Arrival for inputs like q, k (built once per kind
        of input: host work at key time), or None where early_start_reason says no or the
        fused mask does not run the Gluon forward."""
        key = (str(_named(q.device)), q.dtype, q.shape[1:], k.shape[1:])
        if key not in self._arrivals:
            arrival = None
            if self.early_start_reason(q, k, backend) is None:
                from ..kernels.triton import gluon_fwd_plan
                from ..kernels.triton.gluon_forward import Arrival, arrival_order, late_tiles
                plan = gluon_fwd_plan(q, k, self.meta.fused.plan, self.softcap)
                if plan is not None:
                    rows = [(dst, dst + m) for _, dst, m in self.meta.fused_layout.recv_copies]
                    late = late_tiles(plan.num_k_tiles, plan.block_n, rows,
                                      plan.k_starts.cpu().numpy())
                    order, n_first = arrival_order(plan, late)
                    arrival = Arrival(new_flag(q.device), torch.from_numpy(late).to(q.device),
                                      torch.from_numpy(order).to(q.device), n_first)
            self._arrivals[key] = arrival
        return self._arrivals[key]

    def _cut_backward(self, dout, q, k, v, out, lse, backend: str, recv=None):
        """The fused stage's backward cut by keys: the received keys' kernel first (``recv``:
        the forward's received KV, in the cast's order), so that their dK/dV travel back to
        their owners while the own keys' kernel runs; dq summed, the returned partials added
        into the own dk, dv as in ``_fused_backward``. Two bf16 partials summed once round as
        an fp32 sum would."""
        h = k.shape[1]
        if recv is None:
            recv = self._issue(self._cast((k, v), 0)).wait()
        win = self.meta.stages[0].window
        if win is None:  # no row reads a received key: their gradients are zero
            dq_r, partial = None, torch.zeros_like(recv)
        else:  # the rows that read received keys alone (views: no copy)
            rows = slice(win.start, win.end)
            dq_r, dk_r, dv_r = self._bwd(dout[rows], q[rows], recv[:, :h], recv[:, h:],
                                         out[rows], lse[rows], win.attn, backend)
            partial = torch.cat([dk_r, dv_r], dim=1)
        own = []
        finish = self._reduce_into_own(partial, lambda: own[0])
        dq, dk, dv = self._bwd(dout, q, k, v, out, lse, self.meta.host, backend)
        own.append((dk, dv))
        if dq is None:
            dq = torch.zeros_like(q)
        if dq_r is not None:
            dq[win.start:win.end].add_(dq_r)
        return (dq, *finish())

    def _merge_received(self, q, k_recv, v_recv, out, lse, backend: str):
        """(out, lse) of the own keys merged with the received keys' (stage 0, cut by keys),
        in q's dtype: the received keys' kernel and the merge run on their rows alone."""
        win = self.meta.stages[0].window
        if win is None:
            return out.to(q.dtype), lse
        if win.covers(q.shape[0]):  # the merge's result is the whole out: no copy back
            o, l = self._fwd(q, k_recv, v_recv, win.attn, backend)
            return merge_out_lse(out, lse, o, l, q.dtype)
        rows = slice(win.start, win.end)
        o, l = self._fwd(q[rows], k_recv, v_recv, win.attn, backend)
        out = out.to(q.dtype)  # the host kernel's out (q's dtype already: no copy)
        out[rows], lse[rows] = merge_out_lse(out[rows], lse[rows], o, l, q.dtype)
        return out, lse

    def _fused_kv_start(self, k: torch.Tensor, v: torch.Tensor):
        """(buffer, landing): the fused KV buffer [size, 2 * Hkv, D] as ``meta.fused_layout``
        places it, with its own part written and the cast in flight; ``landing()`` waits for
        the cast, puts the received part in place and returns the received KV in the cast's
        order (a view of the buffer where it landed in one region). The cast is issued first,
        gathering its send buffer straight from k and v, so the own part's copies into the
        buffer run while it is in flight; it writes in place when its pieces land in one
        region, else into its own buffer and each piece is copied."""
        lay, h = self.meta.fused_layout, k.shape[1]
        recv = self.meta.stages[0].cast.recv_seqlen
        kv_all = torch.empty((lay.size, 2 * h, k.shape[2]), dtype=k.dtype, device=k.device)
        recv_at = lay.recv_at
        for at, m in lay.pads:  # keys no slice reads, in tiles that read others: zeros, not NaN
            kv_all[at:at + m].zero_()
        if self.meta.fused_split is not None:
            # the local rows' kernel runs before the received keys land: its tiles that straddle
            # them must read zeros there, not uninitialised memory (0 * NaN is NaN in P @ V)
            for _, dst, m in lay.recv_copies:
                kv_all[dst:dst + m].zero_()
        pending = self._issue(self._cast(
            (k, v), 0, out=None if recv_at is None else kv_all[recv_at:recv_at + recv]))
        # while the cast is in flight, one kernel writing whole k|v rows: 35 us against 94 for
        # four strided copies (2 H200s, 16k causal_document)
        range_copy_stacked_(kv_all, self._own_rows(k.device, "buffer"), (k, v),
                            self._own_rows(k.device, "local"))

        def landing() -> torch.Tensor:
            buf = pending.wait()
            if recv_at is None:
                for src, dst, m in lay.recv_copies:
                    kv_all[dst:dst + m] = buf[src:src + m]
            return buf

        return kv_all, landing

    def _own_rows(self, device: torch.device, side: str) -> torch.Tensor:
        """The own tokens' rows of the fused layout's own copies, int64 on ``device`` (built once
        per device): "local" in the shard, "buffer" in the fused KV buffer."""
        key = (str(device), side)
        if key not in self._own_index:
            at = 0 if side == "local" else 1
            ranges = np.array([(c[at], c[at] + c[2]) for c in self.meta.fused_layout.own_copies],
                              dtype=np.int64).reshape(-1, 2)
            self._own_index[key] = torch.from_numpy(ranges_to_index(ranges)).to(device)
        return self._own_index[key]

    def _split_forward(self, q, k, v, backend: str):
        """The fused stage cut by rows (``meta.fused_split``): the local rows' kernel runs while
        the cast is in flight, and each remote block's once it has landed, its rows written
        over the local call's (which kept none of them). On CUDA with overlap on, the blocks
        run on a second stream beside the local kernel, so the two share one tail instead of
        running back to back; their outputs are copied in after both (the local call writes
        the blocks' rows too, as rows without keys)."""
        split, h = self.meta.fused_split, k.shape[1]
        kv_all, landing = self._fused_kv_start(k, v)
        side = self._stream(q.device, "blocks") if self.overlap else None
        main = torch.cuda.current_stream(q.device) if side is not None else None
        if side is not None:  # before the local kernel, which the blocks must not wait for
            side.wait_stream(main)  # the buffer's own part is in place
        out, lse = self._fwd(q, kv_all[:, :h], kv_all[:, h:], split.local, backend,
                             beside_comm=True)
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            landing()
            results = self._split_blocks_fwd(q, kv_all, h, backend)
        if side is not None:
            main.wait_stream(side)
            for _, o, l in results:  # made on the side stream, read and freed on this one
                o.record_stream(main)
                l.record_stream(main)
        for g, o, l in results:
            out[g.q_start:g.q_end] = o
            lse[g.q_start:g.q_end] = l
        return out, lse, kv_all

    def _split_blocks_fwd(self, q, kv_all, h: int, backend: str):
        """[(geometry, out, lse)] of the row split's remote blocks over the landed buffer."""
        results = []
        for block in self.meta.fused_split.blocks:
            g = block.geometry
            kv = kv_all[g.k_start:g.k_end]
            results.append((g, *self._fwd(q[g.q_start:g.q_end], kv[:, :h], kv[:, h:],
                                          block.attn, backend)))
        return results

    def _split_backward(self, dout, q, k, v, out, lse, backend: str, kv_all=None):
        """The blocks first: the received keys' dK/dV come from them alone, so their reduce to
        the owners runs while the local rows' kernel does; the own keys' dK/dV are the local
        call's plus the blocks' own pieces."""
        split, lay, h = self.meta.fused_split, self.meta.fused_layout, k.shape[1]
        if kv_all is None:
            kv_all = self._fused_kv(k, v)
        recv = self.meta.stages[0].cast.recv_seqlen
        partial = torch.zeros((recv, 2 * h, k.shape[2]), dtype=k.dtype, device=k.device)
        block_grads = []
        for block in split.blocks:
            g = block.geometry
            rows, kv = slice(g.q_start, g.q_end), kv_all[g.k_start:g.k_end]
            dq_b, dk_b, dv_b = self._bwd(dout[rows], q[rows], kv[:, :h], kv[:, h:], out[rows],
                                         lse[rows], block.attn, backend)
            dkv_b = torch.cat([dk_b, dv_b], dim=1)
            for at, src, m in g.recv_pieces:
                partial[src:src + m] += dkv_b[at:at + m]
            block_grads.append((g, dq_b, dkv_b))
        dkv = torch.empty((k.shape[0], 2 * h, k.shape[2]), dtype=torch.float32, device=k.device)
        # the reduce adds into dkv when waited for, so with overlap off it starts once dkv holds
        # the own keys' gradients
        reducing = self._reduce(partial, dkv, 0) if self.overlap else None
        dq, dk_all, dv_all = self._bwd(dout, q, kv_all[:, :h], kv_all[:, h:], out, lse,
                                       split.local, backend)
        dq = torch.zeros_like(q) if dq is None else dq
        for src, dst, m in lay.own_copies:
            dkv[src:src + m, :h] = dk_all[dst:dst + m]
            dkv[src:src + m, h:] = dv_all[dst:dst + m]
        for g, dq_b, dkv_b in block_grads:
            if dq_b is not None:
                dq[g.q_start:g.q_end] = dq_b
            for at, loc, m in g.own_pieces:
                dkv[loc:loc + m] += dkv_b[at:at + m]
        (reducing or self._reduce(partial, dkv, 0)).wait()
        return dq, dkv[:, :h].to(k.dtype), dkv[:, h:].to(v.dtype)

    def _fused_backward(self, dout, q, k, v, out, lse, backend: str, kv_all=None):
        """One backward kernel over the fused KV (the forward's buffer when given: no second
        cast); the received part's dK/dV go back to their owners (group_reduce, gathered in the
        cast's buffer order: the forward's copies read backwards) and add to the own part's
        (gathered in local order): straight into the kernel's dk, dv where each own token went
        to one rank, else through an fp32 accumulator."""
        lay, h = self.meta.fused_layout, k.shape[1]
        if kv_all is None:
            kv_all = self._fused_kv(k, v)
        dq, dk_all, dv_all = self._bwd(dout, q, kv_all[:, :h], kv_all[:, h:], out, lse,
                                       self.meta.fused, backend)
        partial = torch.cat([_gather(dk_all, lay.recv_copies), _gather(dv_all, lay.recv_copies)],
                            dim=1)
        # the own part is read where the kernel wrote it (a view when it is one piece)
        own = (_gather(dk_all, lay.own_copies), _gather(dv_all, lay.own_copies))
        finish = self._reduce_into_own(partial, lambda: own)
        dq = torch.zeros_like(q) if dq is None else dq
        return (dq, *finish())

    def _reduce_into_own(self, partial: torch.Tensor, own_grads):
        """Start stage 0's reduce of ``partial`` (the received keys' dK|dV, for the other
        ranks); returns finish() -> (dk, dv) of the own keys: ``own_grads()`` (called at
        finish, so the own keys' kernel may run after the start) plus what arrived, added
        straight into them where each own token went to one rank (``reduces_in_place``), else
        through an fp32 accumulator rounded back once. The plain collective starts now (overlap
        on); the two-hop one, whose relay takes the accumulator's dtype, starts at finish."""
        def target():
            dk, dv = own_grads()
            return (dk, dv) if self.reduces_in_place else torch.cat([dk, dv], dim=1).float()

        def rounded(got):
            if isinstance(got, tuple):
                return got
            h = got.shape[1] // 2
            return got[:, :h].to(partial.dtype), got[:, h:].to(partial.dtype)

        if self.hier_stages is not None or not self.overlap:
            return lambda: rounded(self._reduce(partial, target(), 0).wait())
        handle = self._reduce(partial, target, 0)
        return lambda: rounded(handle.wait())

    def _check(self, q, k, v) -> None:
        n_q, n_kv = self.meta.shard_seqlen, self.meta.shard_seqlen_kv
        for name, t, n in (("q", q, n_q), ("k", k, n_kv), ("v", v, n_kv)):
            if t.dim() != 3 or t.shape[0] != n:
                side = "shard_seqlen" if name == "q" else "shard_seqlen_kv"
                raise ValueError(f"{name} must be the local shard [{side}={n}, heads, "
                                 f"head_dim] (dispatch it first), got {tuple(t.shape)}")
        if k.shape != v.shape:
            raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
        if not q.dtype == k.dtype == v.dtype:
            raise TypeError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
        if q.shape[2] != k.shape[2] or q.shape[1] % k.shape[1]:
            raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)}: head_dim must match and "
                             "num_heads_q be a multiple of num_heads_kv")
