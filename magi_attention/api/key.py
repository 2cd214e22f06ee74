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
from ..meta import AttnShape, DispatchMeta, MagiMeta, OverlapConfig, SliceArray, solve_magi_meta
from ._groups import CpGroups, resolve_cp_groups
from ._tune_balance import resolve_balance
from ._tune_cut import resolve_cut
from ._tune_dispatch import resolve_dispatch


@dataclass(frozen=True)
class DistAttnKey:
    """Everything one rank needs to dispatch, attend and undispatch: returned by
    ``magi_attn_flex_key``, passed to ``dispatch``, ``calc_attn`` and ``undispatch``."""

    total_seqlen: int
    chunk_size: int
    groups: CpGroups
    meta: MagiMeta
    runtime: DistAttnRuntime
    backend: str  # the FFA backend calc_attn runs ("fa4", "triton" or "reference")

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

    def position_ids(self, device="cpu") -> torch.Tensor:
        """Global token index of each local token: int64 [shard_seqlen]."""
        return torch.from_numpy(self.meta.dispatch.position_ids(self.cp_rank)).to(device)


def magi_attn_flex_key(q_ranges, k_ranges, attn_type_map, total_seqlen: int, num_heads_q: int,
                       num_heads_kv: int, head_dim: int, cp_group_or_mesh=None,
                       chunk_size: int = 512, dispatch_alg: str = "auto",
                       num_stages: int | None = None, overlap: OverlapConfig | None = None,
                       softmax_scale: float | None = None, softcap: float = 0.0,
                       backend: str = "auto", dtype: torch.dtype = torch.bfloat16,
                       hierarchical: bool | None = None, device=None) -> DistAttnKey:
    """Solve MagiAttention's dispatch and communication for one global mask.

    Args:
        q_ranges, k_ranges: [num_slices, 2] half-open token ranges of the global sequence
            (int tensor, numpy array or list of pairs); slice i covers q_ranges[i] x k_ranges[i].
        attn_type_map: [num_slices] AttnMaskType values (or names); None means all FULL.
        total_seqlen: S, the global sequence length (q and k: self-attention).
        num_heads_q, num_heads_kv, head_dim: tensor shapes, for the overlap cost model.
        cp_group_or_mesh: a ProcessGroup (None: the default group) or a DeviceMesh, 1D or 2D
            (inter-node x intra-node; 2D enables the hierarchical group_cast).
        chunk_size: dispatch granularity; S must be a multiple of cp_size * chunk_size.
        dispatch_alg: "auto" (default: min_heap, or sequential / balanced_runs where the FA4
            kernel's native varlen path on whole runs of documents predicts faster;
            ``key.meta.algorithm`` names the one that ran), "min_heap" (best balance),
            "sequential", "sorted_sequential" or "balanced_runs" (two runs per rank, cut for
            balance); "unequal_runs" (opt-in) lets ranks hold unequal token counts (one run
            each, or at cp 2 a window and its outside, cut by FA4's tile model: a heavy
            document can stay whole on one rank, as HybridCP places it); then
            ``key.dispatch_meta.shard_seqlen_of(rank)`` is each rank's local length and the
            rest of the model layer runs on unequal shares. "timed" (opt-in, unequal shares
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
            balanced_runs' cuts (same tokens a rank) by each rank's kernel time measured here
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

    Returns:
        DistAttnKey. Every rank of the group must build it with the same arguments.

    Raises:
        ValueError: S not a multiple of cp_size * chunk_size, slices out of [0, S), shapes of
            the range tensors disagreeing, unknown dispatch_alg.

    Example:
        >>> key = magi_attn_flex_key([[0, 8192]], [[0, 8192]], [AttnMaskType.CAUSAL], 8192,
        ...                          32, 8, 128, group, chunk_size=512)
        >>> q_local, k_local, v_local = (dispatch(x, key) for x in (q, k, v))
        >>> out_local, meta = calc_attn(q_local, k_local, v_local, key)
        >>> out = undispatch(out_local, key)
    """
    slices = _slices_from_args(q_ranges, k_ranges, attn_type_map, total_seqlen)
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
        return (digest, total_seqlen, chunk, alg, overlap, groups.cp_size, kernel,
                softmax_scale, softcap, groups.hierarchical, shape, str(dtype))

    build = lambda alg, chunk: _build_key(  # noqa: E731
        slices, total_seqlen, chunk, alg, overlap, groups, shape, kernel, softmax_scale,
        softcap, backend, dtype, torch.device(device), signature(chunk, alg))
    if dispatch_alg == "timed":
        return resolve_dispatch(build, chunk_size, groups.cp_size, total_seqlen,
                                groups.cp_group, torch.device(device), shape, dtype,
                                signature(chunk_size, dispatch_alg))
    return build(dispatch_alg, chunk_size)


def _build_key(slices: SliceArray, total_seqlen: int, chunk_size: int, dispatch_alg: str,
               overlap: OverlapConfig, groups: CpGroups, shape: AttnShape, kernel: str,
               softmax_scale, softcap: float, backend: str, dtype: torch.dtype,
               device: torch.device, signature: tuple) -> DistAttnKey:
    """One key for one dispatch algorithm: the meta solved, balanced_runs' timed balance and
    the timed cut resolved (each kept per process under ``signature``), the runtime planned."""
    num_heads_q, num_heads_kv, head_dim = shape.num_heads_q, shape.num_heads_kv, shape.head_dim
    meta = solve_magi_meta(slices, total_seqlen, groups.cp_size, chunk_size, groups.cp_rank, shape,
                           dispatch_alg, overlap, kernel=kernel)
    meta, balance_seconds = resolve_balance(overlap, meta, slices, shape, groups.cp_group,
                                            groups.cp_rank, device, kernel, dtype,
                                            softmax_scale, softcap, signature)
    hier_stages = hier_groups = None
    if groups.hierarchical:
        hier_stages = tuple(build_hier_cast_args(meta.table, meta.dispatch, groups.cp_rank, j,
                                                 groups.mesh_shape)
                            for j in range(meta.runtime.num_stages))
        hier_groups = (groups.inter_group, groups.intra_group)
    runtime = DistAttnRuntime(meta.runtime, groups.cp_group, softmax_scale, softcap, backend,
                              hier_stages=hier_stages, hier_groups=hier_groups)
    resolved = runtime.prepare(device, head_dim, dtype, num_heads_q, num_heads_kv)
    runtime.dynamic_grid = overlap.dynamic_grid  # before the cut is timed: it runs that way
    runtime.balance_seconds = balance_seconds
    runtime.split = overlap.split_directions
    runtime.cut = resolve_cut(overlap, runtime, device, num_heads_q, num_heads_kv, head_dim,
                              dtype, signature)
    if overlap.early_start:  # planned now; runtime.early_start_reason says where it applies
        runtime.enable_early_start(device, head_dim, dtype, num_heads_q, num_heads_kv)
    # "auto" may cut balanced_runs on finer chunks than asked (dispatch_choice.refine_cut)
    return DistAttnKey(total_seqlen, meta.dispatch.chunk_size, groups, meta, runtime, resolved)


def magi_attn_varlen_key(cu_seqlens: Sequence[int] | torch.Tensor, num_heads_q: int,
                         num_heads_kv: int, head_dim: int, cp_group_or_mesh=None,
                         causal: bool = False, chunk_size: int = 512, **kwargs) -> DistAttnKey:
    """Shortcut for packed documents: one FULL (or CAUSAL) slice per document.

    cu_seqlens: [num_docs + 1] cumulative lengths from 0 to S. Other arguments as
    ``magi_attn_flex_key``.
    """
    cu = [int(x) for x in (cu_seqlens.tolist() if torch.is_tensor(cu_seqlens) else cu_seqlens)]
    if not cu or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must start at 0 and not decrease, got {cu[:8]}...")
    docs = [(r.start, r.end) for r in AttnRanges.from_cu_seqlens(cu) if r.seqlen]
    mask_type = AttnMaskType.CAUSAL if causal else AttnMaskType.FULL
    return magi_attn_flex_key(docs, docs, [mask_type] * len(docs), cu[-1], num_heads_q,
                              num_heads_kv, head_dim, cp_group_or_mesh, chunk_size, **kwargs)


def _slices_digest(slices: SliceArray) -> str:
    """A digest of the global mask, the same on every rank (the cut timing's cache key)."""
    h = hashlib.sha1()
    for column in (slices.q_start, slices.q_end, slices.k_start, slices.k_end, slices.mask_type):
        h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
    return h.hexdigest()


def _slices_from_args(q_ranges, k_ranges, attn_type_map, total_seqlen: int) -> SliceArray:
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
    for name, r in (("q_ranges", q), ("k_ranges", k)):
        bad = (r[:, 0] < 0) | (r[:, 0] > r[:, 1]) | (r[:, 1] > total_seqlen)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] = {r[i].tolist()} is not a range inside "
                             f"[0, total_seqlen={total_seqlen})")
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
