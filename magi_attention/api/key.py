"""magi_attn_flex_key / magi_attn_varlen_key: solve the dispatch and comm meta once per mask."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..common import AttnMaskType, AttnRanges
from ..functional import DistAttnRuntime, backend_for
from ..meta.hier_comm_meta import build_hier_cast_args
from ..meta import (AttnShape, DispatchMeta, MagiMeta, OverlapConfig, SliceArray,
                    solve_cross_meta, solve_magi_meta)
from ._groups import CpGroups, resolve_cp_groups
from ._tune_balance import resolve_balance
from ._tune_cut import resolve_cut
from ._tune_dispatch import resolve_dispatch


SIDES = ("q", "kv")


@dataclass(frozen=True)
class DistAttnKey:
    """Everything one rank needs to dispatch, attend and undispatch: returned by
    ``magi_attn_flex_key``, passed to ``dispatch``, ``calc_attn`` and ``undispatch``.

    ``total_seqlen`` and ``chunk_size`` are q's (under self-attention k's and v's too); a
    cross-attention key (``is_cross``) dispatches k and v on their own sequence of
    ``total_seqlen_k`` tokens (``dispatch_meta_kv``, ``position_ids(side="kv")``)."""

    total_seqlen: int
    chunk_size: int
    groups: CpGroups
    meta: MagiMeta
    runtime: DistAttnRuntime
    backend: str  # the FFA backend calc_attn runs ("fa4", "triton" or "reference")
    deterministic: bool = False  # calc_attn's forward and backward bitwise repeatable

    @property
    def is_cross(self) -> bool:
        """Whether k and v are dispatched apart from q (``total_seqlen_q`` / ``_k`` given)."""
        return self.meta.dispatch_kv is not None

    @property
    def total_seqlen_q(self) -> int:
        return self.meta.dispatch.total_seqlen

    @property
    def total_seqlen_k(self) -> int:
        return self.meta.kv_dispatch.total_seqlen

    @property
    def shard_seqlen_q(self) -> int:
        """Local q rows of this rank (of out, lse and dq too)."""
        return self.meta.dispatch.shard_seqlen_of(self.cp_rank)

    @property
    def shard_seqlen_kv(self) -> int:
        """Local k, v rows of this rank (``shard_seqlen_q`` under self-attention)."""
        return self.meta.kv_dispatch.shard_seqlen_of(self.cp_rank)

    @property
    def dispatch_meta_kv(self) -> DispatchMeta:
        """Where k and v live (``dispatch_meta`` itself under self-attention)."""
        return self.meta.kv_dispatch

    def dispatch_meta_of(self, side: str) -> DispatchMeta:
        """``dispatch_meta`` for side "q", ``dispatch_meta_kv`` for "kv"."""
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {side!r}")
        return self.meta.dispatch if side == "q" else self.meta.kv_dispatch

    @property
    def cp_size(self) -> int:
        return self.groups.cp_size

    @property
    def cp_rank(self) -> int:
        return self.groups.cp_rank

    @property
    def dispatch_meta(self) -> DispatchMeta:
        return self.meta.dispatch

    @property
    def num_stages(self) -> int:
        return self.runtime.meta.num_stages

    def position_ids(self, device="cpu", side: str = "q") -> torch.Tensor:
        """Global token index of each local token of ``side``: int64 [shard_seqlen_q] ("q") or
        [shard_seqlen_kv] ("kv")."""
        return torch.from_numpy(self.dispatch_meta_of(side).position_ids(self.cp_rank)).to(device)


def magi_attn_flex_key(q_ranges, k_ranges, attn_type_map, total_seqlen: int | None = None,
                       num_heads_q: int | None = None, num_heads_kv: int | None = None,
                       head_dim: int | None = None, cp_group_or_mesh=None,
                       chunk_size: int = 512, dispatch_alg: str = "auto",
                       num_stages: int | None = None, overlap: OverlapConfig | None = None,
                       softmax_scale: float | None = None, softcap: float = 0.0,
                       backend: str = "auto", dtype: torch.dtype = torch.bfloat16,
                       hierarchical: bool | None = None, device=None, *,
                       total_seqlen_q: int | None = None, total_seqlen_k: int | None = None,
                       deterministic: bool = False) -> DistAttnKey:
    """Solve MagiAttention's dispatch and communication for one global mask.

    Args:
        q_ranges, k_ranges: [num_slices, 2] half-open token ranges (int tensor, numpy array or
            list of pairs), q_ranges of the q sequence and k_ranges of the k sequence; slice i
            covers q_ranges[i] x k_ranges[i].
        attn_type_map: [num_slices] AttnMaskType values (or names); None means all FULL.
            CAUSAL on a slice of unequal sides is aligned bottom-right (its last row keeps
            every key of its k_range).
        total_seqlen: S, the global sequence length of q and k alike (self-attention: q, k and
            v are dispatched by the same chunks). Give it, or ``total_seqlen_q`` and
            ``total_seqlen_k``, not both.
        total_seqlen_q, total_seqlen_k: cross-attention (keyword only): q's and k's own
            sequence lengths. q is dispatched by the load-balancing solver over its chunks
            (``dispatch_alg``, each chunk weighing the area of its rows); k and v in contiguous
            shares, rank r holding keys [r * S_k / cp, (r + 1) * S_k / cp) (where keys sit
            moves no compute, only communication; ``meta.dispatch.contiguous_dispatch`` says
            why contiguous). Each rank receives the remote keys its rows read (group_cast) and
            returns their partial dK/dV to the ranks that hold them (group_reduce). Dispatch k
            and v with ``dispatch(x, key, side="kv")``.
        num_heads_q, num_heads_kv, head_dim: tensor shapes, for the overlap cost model
            (required).
        cp_group_or_mesh: a ProcessGroup (None: the default group) or a DeviceMesh, 1D or 2D
            (inter-node x intra-node; 2D enables the hierarchical group_cast).
        chunk_size: q's dispatch granularity; S (S_q) must be a multiple of cp_size *
            chunk_size (cross-attention: S_k a multiple of cp_size).
        dispatch_alg: "auto" (default: min_heap, or sequential / balanced_runs where the FA4
            kernel's native varlen path on whole runs of documents predicts faster;
            ``key.meta.algorithm`` names the one that ran), "min_heap" (best balance),
            "sequential", "sorted_sequential" or "balanced_runs" (two runs per rank, cut for
            balance; under cross-attention "auto" is min_heap, whose choice of candidates
            models q and k cut alike); "unequal_runs" (opt-in, self-attention) lets ranks hold
            unequal token counts (one run
            each, or at cp 2 a window and its outside, cut by FA4's tile model: a heavy
            document can stay whole on one rank, as HybridCP places it); then
            ``key.dispatch_meta.shard_seqlen_of(rank)`` is each rank's local length and the
            rest of the model layer runs on unequal shares. "timed" (opt-in, self-attention,
            unequal shares
            possible) builds both the "auto" key and the unequal_runs one (on 32-token chunks
            where the sequence allows), times each's forward + backward here, communication
            included, and keeps unequal_runs only where it is faster by more than 2%
            (``key.runtime.dispatch_seconds``; kept per process for the same mask and
            shapes; on CPU the reference kernel's time decides, useful for tests only).
        num_stages: fixed number of remote KV stages; None lets the overlap solver choose.
        overlap: full OverlapConfig (cost model rates); its num_stages is overridden by
            ``num_stages`` when that is given. Its ``cut`` runs the fused stage cut by keys
            in the directions named; "auto" times it whole and cut, per direction, here on
            CUDA (a few forward and backward steps on random tensors of the key's shapes;
            kept per process for the same mask and shapes) and keeps the faster.
            ``key.runtime.cut`` names the directions cut. Its ``balance`` "timed" moves
            balanced_runs' cuts (same tokens a rank; self-attention) by each rank's kernel
            time measured here
            on CUDA (meta.timed_balance; ``key.runtime.balance_seconds`` lists each layout's
            per-rank seconds); "model" (default) keeps the cost model's.
        softmax_scale, softcap, backend: passed to the local FFA kernel ("auto": FA4 on Hopper
            where flash-attn-4 is installed, else Triton on CUDA, the reference kernel on CPU;
            the policy of ``magi_attention.functional.resolve_backend``).
        dtype: element type of q, k, v (the cost model's byte counts; the kernel plans).
        hierarchical: use the two-hop cast on a 2D mesh (default: True for a 2D mesh).
        device: where calc_attn will run (default: the current CUDA device when CUDA is
            available, else CPU). Every stage's kernel plan is built for it here, so calls of
            calc_attn do no host work and never synchronise; ``key.backend`` names the kernel.
        deterministic: calc_attn's forward and backward bitwise repeatable from run to run
            (keyword only). The forward has no atomics and runs as it is. In the backward the
            local kernels run ordered: Triton's two-kernel backward (dq without atomics, a
            second pass over the mask; on Hopper it replaces the Gluon one-pass backward,
            which is 1.05-1.32x faster from 8k tokens), FA4's deterministic mode (masks on
            its block-sparse path run Triton's ordered backward); and group_reduce sums the
            partial dK/dV that several ranks return for one token in source-rank order (one
            launch per source rank instead of one atomic scatter-add), in the one-hop and
            the hierarchical reduce, on every fused, cut and staged path. The cost is
            backward time only, no memory.

    Returns:
        DistAttnKey. Every rank of the group must build it with the same arguments.

    Raises:
        ValueError: S not a multiple of cp_size * chunk_size (or S_k of cp_size), slices out
            of [0, S) (q_ranges out of [0, S_q), k_ranges out of [0, S_k)), shapes of the range
            tensors disagreeing, unknown dispatch_alg, both or neither of total_seqlen and
            total_seqlen_q / total_seqlen_k, a self-attention-only option on a cross key.
        TypeError: num_heads_q, num_heads_kv or head_dim missing.

    Example:
        >>> key = magi_attn_flex_key([[0, 8192]], [[0, 8192]], [AttnMaskType.CAUSAL], 8192,
        ...                          32, 8, 128, group, chunk_size=512)
        >>> q_local, k_local, v_local = (dispatch(x, key) for x in (q, k, v))
        >>> out_local, meta = calc_attn(q_local, k_local, v_local, key)
        >>> out = undispatch(out_local, key)

        Cross-attention, 8192 queries over 2048 keys:

        >>> key = magi_attn_flex_key([[0, 8192]], [[0, 2048]], None, num_heads_q=32,
        ...                          num_heads_kv=8, head_dim=128, cp_group_or_mesh=group,
        ...                          total_seqlen_q=8192, total_seqlen_k=2048)
        >>> q_local = dispatch(q, key)                                    # [8192 / cp, 32, 128]
        >>> k_local, v_local = (dispatch(x, key, side="kv") for x in (k, v))  # [2048 / cp, ...]
        >>> out = undispatch(calc_attn(q_local, k_local, v_local, key)[0], key)
    """
    for name, value in (("num_heads_q", num_heads_q), ("num_heads_kv", num_heads_kv),
                        ("head_dim", head_dim)):
        if value is None:
            raise TypeError(f"magi_attn_flex_key: {name} is required")
    seqlen_q, seqlen_k = _seqlens(total_seqlen, total_seqlen_q, total_seqlen_k)
    cross = seqlen_k is not None
    if cross:
        _check_cross_options(dispatch_alg, overlap)
        dispatch_alg = "min_heap" if dispatch_alg == "auto" else dispatch_alg
    slices = _slices_from_args(q_ranges, k_ranges, attn_type_map, seqlen_q, seqlen_k)
    groups = resolve_cp_groups(cp_group_or_mesh, hierarchical)
    overlap = overlap or OverlapConfig()
    if num_stages is not None:
        overlap = OverlapConfig(**{**overlap.__dict__, "num_stages": num_stages})
    shape = AttnShape(num_heads_q, num_heads_kv, head_dim, torch.empty(0, dtype=dtype).element_size())
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device("cpu")
    # the kernel decides which dispatch "auto" picks (its cost model: FA4's native and bitmap
    # paths, Triton's touched tiles)
    probe = lambda h: torch.empty(1, h, head_dim, dtype=dtype, device=device)  # noqa: E731
    kernel = backend_for(backend, probe(num_heads_q), probe(num_heads_kv))
    digest = _slices_digest(slices)

    def signature(chunk: int, alg: str) -> tuple:
        """The timed choices' cache key: everything a timing depends on, alike on every rank
        (the shapes too: a timed balance depends on them)."""
        return (digest, seqlen_q, seqlen_k, chunk, alg, overlap, groups.cp_size, kernel,
                softmax_scale, softcap, groups.hierarchical, shape, str(dtype), deterministic)

    build = lambda alg, chunk: _build_key(  # noqa: E731
        slices, seqlen_q, chunk, alg, overlap, groups, shape, kernel, softmax_scale,
        softcap, backend, dtype, torch.device(device), signature(chunk, alg), seqlen_k,
        deterministic)
    if dispatch_alg == "timed":
        return resolve_dispatch(build, chunk_size, groups.cp_size, seqlen_q,
                                groups.cp_group, torch.device(device), shape, dtype,
                                signature(chunk_size, dispatch_alg))
    return build(dispatch_alg, chunk_size)


def _build_key(slices: SliceArray, total_seqlen: int, chunk_size: int, dispatch_alg: str,
               overlap: OverlapConfig, groups: CpGroups, shape: AttnShape, kernel: str,
               softmax_scale, softcap: float, backend: str, dtype: torch.dtype,
               device: torch.device, signature: tuple, total_seqlen_k: int | None = None,
               deterministic: bool = False) -> DistAttnKey:
    """One key for one dispatch algorithm: the meta solved, balanced_runs' timed balance and
    the timed cut resolved (each kept per process under ``signature``), the runtime planned.
    ``total_seqlen_k``: a cross-attention's k sequence (``total_seqlen`` is then q's)."""
    num_heads_q, num_heads_kv, head_dim = shape.num_heads_q, shape.num_heads_kv, shape.head_dim
    balance_seconds = None
    if total_seqlen_k is None:
        meta = solve_magi_meta(slices, total_seqlen, groups.cp_size, chunk_size, groups.cp_rank,
                               shape, dispatch_alg, overlap, kernel=kernel)
        meta, balance_seconds = resolve_balance(overlap, meta, slices, shape, groups.cp_group,
                                                groups.cp_rank, device, kernel, dtype,
                                                softmax_scale, softcap, signature)
    else:
        meta = solve_cross_meta(slices, total_seqlen, total_seqlen_k, groups.cp_size,
                                chunk_size, groups.cp_rank, shape, dispatch_alg, overlap,
                                kernel=kernel)
    hier_stages = hier_groups = None
    if groups.hierarchical:
        hier_stages = tuple(build_hier_cast_args(meta.table, meta.kv_dispatch, groups.cp_rank,
                                                 j, groups.mesh_shape)
                            for j in range(meta.runtime.num_stages))
        hier_groups = (groups.inter_group, groups.intra_group)
    runtime = DistAttnRuntime(meta.runtime, groups.cp_group, softmax_scale, softcap, backend,
                              deterministic, hier_stages=hier_stages, hier_groups=hier_groups)
    resolved = runtime.prepare(device, head_dim, dtype, num_heads_q, num_heads_kv)
    runtime.dynamic_grid = overlap.dynamic_grid  # before the cut is timed: it runs that way
    runtime.balance_seconds = balance_seconds
    runtime.split = overlap.split_directions
    runtime.cut = resolve_cut(overlap, runtime, device, num_heads_q, num_heads_kv, head_dim,
                              dtype, signature)
    if overlap.early_start:  # planned now; runtime.early_start_reason says where it applies
        runtime.enable_early_start(device, head_dim, dtype, num_heads_q, num_heads_kv)
    # "auto" may cut balanced_runs on finer chunks than asked (dispatch_choice.refine_cut)
    return DistAttnKey(total_seqlen, meta.dispatch.chunk_size, groups, meta, runtime, resolved,
                       deterministic)


def magi_attn_varlen_key(cu_seqlens: Sequence[int] | torch.Tensor | None = None,
                         num_heads_q: int | None = None, num_heads_kv: int | None = None,
                         head_dim: int | None = None, cp_group_or_mesh=None,
                         causal: bool = False, chunk_size: int = 512, *,
                         cu_seqlens_q: Sequence[int] | torch.Tensor | None = None,
                         cu_seqlens_k: Sequence[int] | torch.Tensor | None = None,
                         **kwargs) -> DistAttnKey:
    """Shortcut for packed documents: one FULL (or CAUSAL) slice per document.

    cu_seqlens: [num_docs + 1] cumulative lengths from 0 to S (self-attention). Or, for
    cross-attention, ``cu_seqlens_q`` and ``cu_seqlens_k`` (keyword only, both [num_docs + 1]):
    paired documents, the queries of document i ``[cu_seqlens_q[i], cu_seqlens_q[i + 1])``
    attending the keys ``[cu_seqlens_k[i], cu_seqlens_k[i + 1])``; causal is aligned
    bottom-right as AttnMaskType.CAUSAL is (a document's last query sees all its keys); the key
    is built with ``total_seqlen_q = cu_seqlens_q[-1]`` and ``total_seqlen_k =
    cu_seqlens_k[-1]``. Documents with no query or no key are left out. Other arguments as
    ``magi_attn_flex_key``.
    """
    mask_type = AttnMaskType.CAUSAL if causal else AttnMaskType.FULL
    if cu_seqlens_q is None and cu_seqlens_k is None:
        if cu_seqlens is None:
            raise ValueError("pass cu_seqlens (self-attention) or cu_seqlens_q and cu_seqlens_k "
                             "(cross-attention)")
        cu = _cu_list(cu_seqlens, "cu_seqlens")
        docs = [(r.start, r.end) for r in AttnRanges.from_cu_seqlens(cu) if r.seqlen]
        return magi_attn_flex_key(docs, docs, [mask_type] * len(docs), cu[-1], num_heads_q,
                                  num_heads_kv, head_dim, cp_group_or_mesh, chunk_size, **kwargs)
    if cu_seqlens is not None or cu_seqlens_q is None or cu_seqlens_k is None:
        raise ValueError("pass cu_seqlens (self-attention) or both cu_seqlens_q and "
                         "cu_seqlens_k (cross-attention), not both forms")
    cu_q, cu_k = _cu_list(cu_seqlens_q, "cu_seqlens_q"), _cu_list(cu_seqlens_k, "cu_seqlens_k")
    if len(cu_q) != len(cu_k):
        raise ValueError(f"cu_seqlens_q ({len(cu_q) - 1} documents) and cu_seqlens_k "
                         f"({len(cu_k) - 1}) must pair documents one to one")
    pairs = [(q0, q1, k0, k1) for q0, q1, k0, k1 in zip(cu_q, cu_q[1:], cu_k, cu_k[1:])
             if q1 > q0 and k1 > k0]
    return magi_attn_flex_key([p[:2] for p in pairs], [p[2:] for p in pairs],
                              [mask_type] * len(pairs), None, num_heads_q, num_heads_kv,
                              head_dim, cp_group_or_mesh, chunk_size, total_seqlen_q=cu_q[-1],
                              total_seqlen_k=cu_k[-1], **kwargs)


def _cu_list(cu_seqlens, name: str) -> list[int]:
    cu = [int(x) for x in (cu_seqlens.tolist() if torch.is_tensor(cu_seqlens) else cu_seqlens)]
    if not cu or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"{name} must start at 0 and not decrease, got {cu[:8]}...")
    return cu


def _seqlens(total_seqlen, total_seqlen_q, total_seqlen_k) -> tuple[int, int | None]:
    """(S_q, S_k): S_k None for self-attention (``total_seqlen``)."""
    if total_seqlen is not None:
        if total_seqlen_q is not None or total_seqlen_k is not None:
            raise ValueError("pass total_seqlen (self-attention) or total_seqlen_q and "
                             "total_seqlen_k (cross-attention), not both forms")
        return int(total_seqlen), None
    if total_seqlen_q is None or total_seqlen_k is None:
        raise ValueError("pass total_seqlen (self-attention) or both total_seqlen_q and "
                         f"total_seqlen_k (cross-attention); got total_seqlen_q={total_seqlen_q},"
                         f" total_seqlen_k={total_seqlen_k}")
    for name, value in (("total_seqlen_q", total_seqlen_q), ("total_seqlen_k", total_seqlen_k)):
        if int(value) <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    return int(total_seqlen_q), int(total_seqlen_k)


def _check_cross_options(dispatch_alg: str, overlap: OverlapConfig | None) -> None:
    """The self-attention-only options, refused on a cross-attention key."""
    if dispatch_alg in ("timed", "unequal_runs"):
        raise ValueError(f"dispatch_alg={dispatch_alg!r} (unequal shares) is self-attention "
                         f"only; a cross-attention key takes min_heap, sequential, "
                         f"sorted_sequential, balanced_runs or auto")
    if overlap is not None and overlap.balance == "timed":
        raise ValueError("OverlapConfig(balance='timed') re-cuts a self-attention key's "
                         "balanced_runs; a cross-attention key keeps the cost model's balance")


def _slices_digest(slices: SliceArray) -> str:
    """A digest of the global mask, the same on every rank (the cut timing's cache key)."""
    h = hashlib.sha1()
    for column in (slices.q_start, slices.q_end, slices.k_start, slices.k_end, slices.mask_type):
        h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return h.hexdigest()


def _slices_from_args(q_ranges, k_ranges, attn_type_map, total_seqlen: int,
                      total_seqlen_k: int | None = None) -> SliceArray:
    """``total_seqlen_k``: the k sequence of a cross-attention (None: ``total_seqlen``)."""
    q = _ranges_array(q_ranges, "q_ranges")
    k = _ranges_array(k_ranges, "k_ranges")
    if q.shape != k.shape:
        raise ValueError(f"q_ranges {q.shape} and k_ranges {k.shape} must both be [num_slices, 2]")
    if attn_type_map is None:
        types = np.zeros(len(q), dtype=np.int64)
    else:
        raw = attn_type_map.tolist() if hasattr(attn_type_map, "tolist") else list(attn_type_map)
        types = np.array([int(AttnMaskType.parse(t)) for t in raw], dtype=np.int64)
        if types.shape != (len(q),):
            raise ValueError(f"attn_type_map has {len(types)} entries for {len(q)} slices")
    if total_seqlen_k is None:
        bounds = (("q_ranges", q, "total_seqlen", total_seqlen),
                  ("k_ranges", k, "total_seqlen", total_seqlen))
    else:
        bounds = (("q_ranges", q, "total_seqlen_q", total_seqlen),
                  ("k_ranges", k, "total_seqlen_k", total_seqlen_k))
    for name, r, bound_name, bound in bounds:
        bad = (r[:, 0] < 0) | (r[:, 0] > r[:, 1]) | (r[:, 1] > bound)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] = {r[i].tolist()} is not a range inside "
                             f"[0, {bound_name}={bound})")
    return SliceArray(q[:, 0].copy(), q[:, 1].copy(), k[:, 0].copy(), k[:, 1].copy(), types)


def _ranges_array(ranges, name: str) -> np.ndarray:
    if torch.is_tensor(ranges):
        ranges = ranges.detach().cpu().numpy()
    elif isinstance(ranges, AttnRanges):
        ranges = [[r.start, r.end] for r in ranges]
    arr = np.asarray(ranges, dtype=np.int64)
    if arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must be [num_slices, 2], got shape {arr.shape}")
    return arr
