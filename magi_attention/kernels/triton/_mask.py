"""Inner-loop helpers shared by the forward and backward kernels: the slice-union mask of a tile
and the softcap transform."""
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) == exp2(x * LOG2E); exp2 is the fast path
LN2 = tl.constexpr(0.6931471805599453)  # log(x) == log2(x) * LN2
SLICE_FIELDS = tl.constexpr(6)  # row of BlockSparsePlan.slice_bounds: q_start, q_end, k_start, k_end, lower, upper


@triton.jit
def union_mask(q_idx, k_idx, slice_bounds, slice_idx, slice_lo, slice_hi,
               q_tile_lo, q_tile_hi, k_tile_lo, k_tile_hi):
    """OR over the listed slices of "cell (q, k) is kept". q_idx and k_idx are index tensors that
    broadcast against each other ([M, 1] x [1, N] in the forward, [1, M] x [N, 1] transposed), so
    the one helper serves both layouts. Slices whose rectangle misses the tile are skipped."""
    diag = k_idx - q_idx
    mask = diag != diag  # all False, broadcast shape
    for t in range(slice_lo, slice_hi):
        s = tl.load(slice_idx + t)
        row = slice_bounds + s * SLICE_FIELDS
        q_start = tl.load(row + 0)
        q_end = tl.load(row + 1)
        k_start = tl.load(row + 2)
        k_end = tl.load(row + 3)
        if (q_start < q_tile_hi) & (q_end > q_tile_lo) & (k_start < k_tile_hi) & (k_end > k_tile_lo):
            lower = tl.load(row + 4)
            upper = tl.load(row + 5)
            keep = (q_idx >= q_start) & (q_idx < q_end) & (k_idx >= k_start) & (k_idx < k_end)
            mask = mask | (keep & (diag >= lower) & (diag <= upper))
    return mask


@triton.jit
def tanh(x):
    """tanh through exp2 (saturates cleanly to +-1 for large |x|)."""
    return 1.0 - 2.0 / (tl.exp2(x * (2.0 * LOG2E)) + 1.0)


@triton.jit
def row_table_mask(q_idx, k_idx, row_lo, row_hi, seqlen_q, ROW_INTERVALS: tl.constexpr):
    """"cell (q, k) is kept" from the plan's per-row interval table (ROW_INTERVALS per row,
    disjoint, padded with empty ones). Vector loads only, so the enclosing loop stays pipelined;
    q_idx and k_idx broadcast as in union_mask."""
    q_ok = q_idx < seqlen_q
    mask = (k_idx - q_idx) != (k_idx - q_idx)
    for r in tl.static_range(ROW_INTERVALS):
        lo = tl.load(row_lo + q_idx * ROW_INTERVALS + r, mask=q_ok, other=0)
        hi = tl.load(row_hi + q_idx * ROW_INTERVALS + r, mask=q_ok, other=0)
        mask = mask | ((k_idx >= lo) & (k_idx < hi))
    return mask
