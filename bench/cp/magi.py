"""MagiAttention as a CP strategy: the adapter over ``magi_attention.api``.

shard = ``dispatch`` (the solver's load-balanced chunks), attention = ``calc_attn`` (group-cast
of the remote KV ranges in ``num_stages`` stages overlapped with the host stage, group-reduce of
dKV in the backward), unshard = ``undispatch``. The key (dispatch + comm meta + runtime) is
solved once per mask in the constructor: untimed host work, like every strategy's ``_build``.

Bytes sent are computed from the key's comm meta (the group collectives do not keep counters):
forward, per stage, the k and v tokens this rank casts to other ranks; backward, the partial dk,
dv tokens it reduces back to their owners, plus the same cast again on the staged path (the fused
path keeps the forward's KV buffer for the backward).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from bench.masks.convert import to_slices_tensors
from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch
from magi_attention.common import AttnRange
from magi_attention.meta import OverlapConfig
from magi_attention.meta.overlap_solver import (BALANCE_CHOICES, CUT_CHOICES, SPLIT_CHOICES,
                                               split_directions)

from ._stats import CommStats
from .base import CPStrategy
from .hybrid_cp import token_share_note

DISPATCH_ALGS = ("auto", "min_heap", "sequential", "sorted_sequential", "balanced_runs",
                 "unequal_runs", "timed")
# "layout": the key early_start asks for, the launch itself off (bench A/B arm)
EARLY_START_CHOICES = (False, True, "layout")
DEFAULT_CHUNK_SIZE = 512
MIN_CHUNKS_PER_RANK = 8


def default_chunk_size(seqlen: int, cp_size: int) -> int:
    """``chunk_size=None``: 512 (the published benchmark's value), or seqlen / cp_size / 8 when
    a rank holds fewer than 8 * 512 tokens, so each rank still gets 8 chunks to balance."""
    return max(1, min(DEFAULT_CHUNK_SIZE, seqlen // cp_size // MIN_CHUNKS_PER_RANK))


# -- forward, backward, autograd.Function, wrappers --------------------------------------------
def _sent_tokens(stages, cp_rank: int, reduce: bool) -> int:
    """Tokens this rank sends to other ranks over all stages (cast: send splits; reduce: the
    transpose, i.e. the receive splits of the cast)."""
    total = 0
    for stage in stages:
        splits = stage.cast.recv_split_sizes if reduce else stage.cast.send_split_sizes
        total += sum(n for dst, n in enumerate(splits) if dst != cp_rank)
    return total


class _CountBackwardBytes(torch.autograd.Function):
    """Identity on ``out`` whose backward adds the backward's bytes to the strategy's stats."""

    @staticmethod
    def forward(ctx, out, stats: CommStats, nbytes: int):
        ctx.stats, ctx.nbytes = stats, nbytes
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        ctx.stats.add("bwd", ctx.nbytes)
        return grad, None, None


class MagiAttention(CPStrategy):
    """MagiAttention over ``magi_attention.api``: any AttnSlice mask shared by all heads.

    Knobs:
        chunk_size: dispatch granularity (None: ``default_chunk_size``); the seqlen must be a
            multiple of cp_size * chunk_size (else ``supports`` says so).
        num_stages: remote KV stages (None: the overlap solver chooses).
        dispatch_alg: "auto" (default: the key's choice of min_heap, sequential or balanced_runs,
            named in the row's ``dispatch=`` note), "min_heap", "sequential",
            "sorted_sequential", "balanced_runs", or "unequal_runs" (opt-in: ranks hold unequal
            token counts, as HybridCP's do; the row's note gives ``tokens_per_rank=``), or
            "timed" (opt-in: the key times "auto" against unequal_runs, communication
            included, and keeps the faster; the note's ``dispatch_ms=`` gives both).
        head_dim, dtype: of q, k, v, for the overlap solver's cost model only (the runner fills
            them from the problem; defaults 128, "bfloat16").
        fused_split: cut the fused stage by rows so the local rows' kernel hides the cast
            (``magi_attention.meta.fused_split``): false (default, see OverlapConfig.split),
            true / "both", or one direction, "fwd" or "bwd" (the other runs whole).
        fused: True forces the fused single stage, False the staged overlap (the cast of each
            stage hidden behind the previous stage's kernel, partial outputs merged); None
            (default) lets the overlap solver choose (``OverlapConfig.fused``).
        cut: the fused stage cut by keys per direction (``OverlapConfig.cut``): "auto"
            (default here: the key times it whole and cut on the GPU and keeps the faster,
            untimed like the rest of the key), "none", "fwd", "bwd" or "both".
        balance: balanced_runs' cuts (``OverlapConfig.balance``): "model" (default) or "timed"
            (moved by each rank's kernel time measured at key time, untimed; the row's
            ``balance_ms=`` note gives each layout's slowest / fastest rank's kernel ms, in the
            order measured: the first is the model's, the lowest slowest is kept).
        early_start: the fused forward's Gluon kernel launched before the cast lands, waiting
            on a flag only where it reaches a received key (the runtime's ``early_start``;
            Triton local kernel, one hardware queue, the cast landing in place); the row's
            ``early_start=`` note says on which ranks it applied, or why not. "layout": the
            key built for it (the fused buffer in rank order where that lands the cast in one
            region) with the early launch off, the A/B arm that tells the layout's cost from
            the launch's (the key's own timings, cut and balance, run before the launch is
            planned, so with it off: both arms' keys time the same layout alike).
        dynamic_grid: the Triton forwards that run beside a collective in flight fetch their
            items from a counter (``OverlapConfig.dynamic_grid``; on by default; off in a
            labelled override, see configs/cp/magi.yaml); the key's cut timing runs them so,
            and the row's note says ``dynamic_grid=on`` where the local kernel is Triton's.

    The local kernel's backend, softmax_scale, softcap and ``deterministic`` (bitwise repeatable
    forward and backward: ordered reductions in the kernels and in group_reduce) go to the key.
    """

    name = "magi"
    knob_names = ("chunk_size", "num_stages", "dispatch_alg", "head_dim", "dtype",
                  "fused_split", "fused", "cut", "balance", "early_start", "dynamic_grid")

    @classmethod
    def _check(cls, mask, num_heads_q, num_heads_kv, cp_size, chunk_size=None, num_stages=None,
               dispatch_alg="auto", head_dim=128, dtype="bfloat16", fused_split=False,
               fused=None, cut="auto", balance="model", early_start=False, dynamic_grid=True):
        if dynamic_grid not in (True, False):
            raise ValueError(f"magi: dynamic_grid must be true or false, got {dynamic_grid!r}")
        if early_start not in EARLY_START_CHOICES:
            raise ValueError(f"magi: early_start must be one of {EARLY_START_CHOICES}, "
                             f"got {early_start!r}")
        if balance not in BALANCE_CHOICES:
            raise ValueError(f"magi: balance must be one of {BALANCE_CHOICES}, got {balance!r}")
        if cut not in CUT_CHOICES:
            raise ValueError(f"magi: cut must be one of {CUT_CHOICES}, got {cut!r}")
        if fused_split not in SPLIT_CHOICES:
            raise ValueError(f"magi: fused_split must be one of {SPLIT_CHOICES}, "
                             f"got {fused_split!r}")
        if fused not in (None, True, False):
            raise ValueError(f"magi: fused must be true, false or null, got {fused!r}")
        if fused and num_stages not in (None, 1):
            raise ValueError(f"magi: fused runs one stage, got num_stages={num_stages}")
        if dispatch_alg not in DISPATCH_ALGS:
            raise ValueError(f"magi: dispatch_alg must be one of {DISPATCH_ALGS}, "
                             f"got {dispatch_alg!r}")
        if num_stages is not None and num_stages < 1:
            raise ValueError(f"magi: num_stages must be >= 1 or None, got {num_stages}")
        chunk = chunk_size if chunk_size is not None else default_chunk_size(mask.seqlen, cp_size)
        if chunk < 1:
            raise ValueError(f"magi: chunk_size must be >= 1, got {chunk}")
        if mask.seqlen % (cp_size * chunk):
            return (f"seqlen={mask.seqlen} is not a multiple of cp_size * chunk_size = "
                    f"{cp_size} * {chunk}")
        return None

    def _build(self, chunk_size=None, num_stages=None, dispatch_alg="auto", head_dim=128,
               dtype="bfloat16", fused_split=False, fused=None, cut="auto",
               balance="model", early_start=False, dynamic_grid=True) -> None:
        seqlen = self.mask.seqlen
        chunk = chunk_size if chunk_size is not None else default_chunk_size(seqlen, self.cp_size)
        kernel = self.kernel
        self.key = magi_attn_flex_key(
            *to_slices_tensors(self.mask, "cpu"), seqlen, self.num_heads_q, self.num_heads_kv,
            head_dim, self.group, chunk_size=chunk, dispatch_alg=dispatch_alg,
            num_stages=num_stages, overlap=OverlapConfig(split=fused_split, fused=fused, cut=cut,
                                                       balance=balance,
                                                       early_start=bool(early_start),
                                                       dynamic_grid=dynamic_grid),
            softmax_scale=kernel.softmax_scale, softcap=kernel.softcap,
            backend=kernel.backend, dtype=getattr(torch, dtype),
            deterministic=kernel.deterministic)
        meta = self.key.meta.dispatch
        chunk = meta.chunk_size  # "auto" may cut balanced_runs finer than asked
        self.layouts = [[AttnRange(c * chunk, (c + 1) * chunk) for c in meta.chunks_of(r)]
                        for r in range(self.cp_size)]
        stages = self.key.runtime.meta.stages
        self._cast_tokens = _sent_tokens(stages, self.cp_rank, reduce=False)
        self._reduce_tokens = _sent_tokens(stages, self.cp_rank, reduce=True)
        # set_overlap must answer alike on every rank (it decides whether all time again);
        # the split is per rank, so the ranks agree on it (only where it was asked for)
        self._any_split = False
        if split_directions(fused_split):
            splits = [None] * self.cp_size
            dist.all_gather_object(splits, self.key.runtime.meta.fused_split is not None,
                                   group=self.group)
            self._any_split = any(splits)
        # the timed cut is agreed by all ranks at key time, so this is the same on every rank
        self._any_cut_fwd = "fwd" in self.key.runtime.cut
        plan = self.key.meta.stage_plan
        # the overlap solver's prediction for the slowest rank (fwd + bwd); not a measurement
        self.notes = (f"chunk_size={chunk}; dispatch={self.key.meta.algorithm}; "
                      f"num_stages={self.key.num_stages}; "
                      f"fused={self.key.runtime.meta.fused is not None}; "
                      f"split_blocks={_split_blocks(self.key.runtime.meta)}; "
                      f"cut={','.join(sorted(self.key.runtime.cut)) or '-'}; "
                      f"pred_comm_us={plan.comm_us:.0f}; pred_hidden_us={plan.hidden_us:.0f}; "
                      f"local={self.key.backend}; imbalance={meta.imbalance():.3f}")
        timed = self.key.runtime.cut_seconds
        if timed:  # the key's timing of the cut by keys (ms a call: whole / cut)
            self.notes += "; cut_ms=" + ",".join(
                f"{d}:{whole * 1e3:.3f}/{cut * 1e3:.3f}" for d, (whole, cut) in timed.items())
        measured = self.key.runtime.balance_seconds
        if measured:  # each layout's slowest / fastest rank's kernel ms, in the order measured
            self.notes += "; balance_ms=" + ",".join(
                f"{max(t) * 1e3:.3f}/{min(t) * 1e3:.3f}" for t in measured)
        chose = self.key.runtime.dispatch_seconds
        if chose:  # dispatch_alg="timed": each candidate's forward + backward ms
            self.notes += "; dispatch_ms=" + ",".join(f"{alg}:{s * 1e3:.3f}"
                                                      for alg, s in chose.items())
        if not meta.equal_shards:  # unequal_runs: the rest of a layer runs on unequal shares
            self.notes += "; " + token_share_note(list(meta.shard_seqlens))
        if dynamic_grid and self.key.backend == "triton":  # FA4 has no dynamic grid
            self.notes += "; dynamic_grid=on"
        self._any_early = False
        if early_start == "layout":  # the key's layout alone: the launch waits for the cast
            self.key.runtime.early_start = False
            self.notes += "; early_start=layout only"
        elif early_start:  # the key turned it on; the ranks agree whether it hides (set_overlap)
            reasons = [None] * self.cp_size
            dist.all_gather_object(reasons, self.key.runtime.early_start_note, group=self.group)
            self._any_early = any(r is None for r in reasons)
            self.notes += "; early_start=" + " / ".join(
                f"r{r}:{'on' if why is None else 'off (' + why + ')'}"
                for r, why in enumerate(reasons))

    def set_overlap(self, enabled: bool) -> bool:
        """Turn the stages' comm/compute overlap on or off; False when there is nothing to
        overlap (no remote stage, or the fused stage run whole, whose communication is exposed
        anyway; cut by rows, its local rows' kernel hides it, and cut by keys in the forward,
        its own keys' kernel). The CP runner times both to report the communication time the
        stages hide."""
        runtime = self.key.runtime
        meta = runtime.meta
        hides = self._any_split or self._any_cut_fwd or self._any_early
        if not meta.stages or (meta.fused is not None and not hides):
            return False
        runtime.overlap = enabled
        return True

    def shard(self, x_global: torch.Tensor) -> torch.Tensor:
        """``dispatch``: this rank's chunks of a global tensor (new tensor, no grad)."""
        if x_global.shape[0] != self.mask.seqlen:
            raise ValueError(f"x_global has {x_global.shape[0]} rows, the mask has "
                             f"seqlen={self.mask.seqlen}")
        return dispatch(x_global.detach(), self.key)

    def unshard(self, y_local: torch.Tensor) -> torch.Tensor:
        """``undispatch``: all ranks' chunks gathered into global order (collective, no grad)."""
        return undispatch(y_local.detach(), self.key)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``calc_attn`` on dispatched q, k, v -> this rank's out rows, with autograd."""
        token_bytes = 2 * k.shape[1] * k.shape[2] * k.element_size()  # k and v of one token
        self.stats.add("fwd", self._cast_tokens * token_bytes)
        out, _ = calc_attn(q, k, v, self.key)
        if not torch.is_grad_enabled() or not out.requires_grad:
            return out
        recast = 0 if self.key.runtime.meta.fused is not None else self._cast_tokens
        bwd_bytes = (recast + self._reduce_tokens) * token_bytes
        return _CountBackwardBytes.apply(out, self.stats, bwd_bytes)


__all__ = ["MagiAttention", "default_chunk_size", "DISPATCH_ALGS"]


def _split_blocks(meta) -> str:
    """Remote blocks of the fused stage cut by rows on this rank, "-" when it runs whole."""
    return "-" if meta.fused_split is None else str(len(meta.fused_split.blocks))
