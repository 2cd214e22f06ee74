"""gluon_forward.tma_rows: which [S, H, D] tensors the Gluon kernels read in place by TMA (a
view of the CP runtime's fused KV buffer) and which they copy first (CPU; the kernels on such
views: test_triton_gpu.py's test_gluon_kernels_read_strided_kv_in_place)."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton.experimental.gluon")

from magi_attention.kernels.triton.gluon_forward import tma_rows  # noqa: E402


@pytest.mark.parametrize("half", [0, 1], ids=["k", "v"])
def test_the_halves_of_a_fused_kv_buffer_are_read_in_place(half):
    kv_all = torch.zeros(300, 16, 128, dtype=torch.bfloat16)
    view = kv_all[:, 8 * half:8 * (half + 1)]
    assert not view.is_contiguous()
    assert tma_rows(view) is view


def test_contiguous_and_row_slices_are_kept():
    t = torch.zeros(300, 8, 128, dtype=torch.bfloat16)
    assert tma_rows(t) is t
    assert tma_rows(t[17:200]) is not None and tma_rows(t[17:200]).data_ptr() == t[17].data_ptr()


@pytest.mark.parametrize("make", [
    lambda: torch.zeros(8, 300, 128, dtype=torch.bfloat16).transpose(0, 1),  # heads not packed
    lambda: torch.zeros(300, 8, 256, dtype=torch.bfloat16)[:, :, :128],  # a head_dim slice
    lambda: torch.zeros(300 * 8 * 128 + 1, dtype=torch.bfloat16)[1:].view(300, 8, 128),  # base
    lambda: torch.zeros(300, 8 * 128 + 4, dtype=torch.bfloat16)[:, :1024].view(300, 8, 128),
], ids=["heads_major", "head_dim_slice", "misaligned_base", "row_stride_not_16_bytes"])
def test_views_tma_cannot_read_are_copied(make):
    t = make()
    got = tma_rows(t)
    assert got.is_contiguous() and got.data_ptr() != t.data_ptr()
    assert torch.equal(got, t)


def test_arrival_order_puts_the_q_tiles_reading_no_late_key_first():
    """gluon_forward.arrival_order: q tiles whose listed key tiles meet none of the late rows
    first, each group in the plan's heaviest-first order; nothing late: the plan's order."""
    import numpy as np

    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    # two documents of 512 (4 tiles each), causal: q tiles 4-7 read keys 512-1023 only
    slices = [AttnSlice.make(0, 512, 0, 512, 1), AttnSlice.make(512, 1024, 512, 1024, 1)]
    plan = plan_block_sparse(slices, 1024, 1024, gf.BLOCK_M, gf.BLOCK_N)
    plain = plan.q_tile_order.numpy()
    late = gf.late_tiles(plan.num_k_tiles, plan.block_n, [(640, 1024)])
    assert late.tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    order, n_first = gf.arrival_order(plan, late)
    assert n_first == 5 and sorted(order[:5]) == [0, 1, 2, 3, 4]
    assert sorted(order[5:]) == [5, 6, 7]
    for part in (order[:5], order[5:]):  # each group keeps the plan's relative order
        rank = {t: i for i, t in enumerate(plain)}
        assert [rank[t] for t in part] == sorted(rank[t] for t in part)
    order, n_first = gf.arrival_order(plan, gf.late_tiles(8, 128, [(1024, 1024)]))
    assert n_first == 8 and np.array_equal(order, plain)
    assert gf.arrival_order(plan, gf.late_tiles(8, 128, [(0, 1024)]))[1] == 0
    # two regions: key tile 0 and key tile 6 late -> q tiles 0-3 and 6-7 read one
    two = gf.late_tiles(8, 128, [(100, 120), (770, 780)])
    assert two.tolist() == [1, 0, 0, 0, 0, 0, 1, 0]
    order, n_first = gf.arrival_order(plan, two)
    assert n_first == 2 and sorted(order[:2]) == [4, 5]
    # tiles cut at the slices: late where a tile [k_starts[j], k_starts[j + 1]) meets the rows
    starts = np.array([0, 128, 200, 328, 456, 500])
    assert gf.late_tiles(5, 128, [(199, 201)], starts).tolist() == [0, 1, 1, 0, 0]
    assert gf.late_tiles(5, 128, [(456, 500), (0, 1)], starts).tolist() == [1, 0, 0, 0, 1]


def test_pick_plan_cuts_long_documents_and_keeps_the_grid_for_short_ones(monkeypatch):
    """gluon_forward.pick_plan: documents of a few hundred to a few thousand tokens off the grid
    take the plan cut at the slices (fewer visited pairs, two more q tiles); a hundred documents
    of 10 tokens keep the grid (a q tile each would cost more than their straddling pairs). The
    backward's pick_plan cuts the long documents too; where the grid plan's lists are long enough for the Gluon backward, it takes a cheaper cut
    plan however short its lists, and where neither plan's are, the grid (the Triton backward's)."""
    from magi_attention.common import AttnMaskType
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_backward as gb
    from magi_attention.kernels.triton import gluon_forward as gf
    from magi_attention.testing import document_slices

    def plans(lens, block_m, block_n):
        n = sum(lens)
        return tuple(plan_block_sparse(document_slices(lens), n, n, block_m, block_n,
                                       cut_at_slices=c) for c in (False, True))

    grid, cut = plans([300, 1000, 700, 2500, 150, 1634], gf.BLOCK_M, gf.BLOCK_N)
    assert gf.pick_plan(grid, cut) is cut and gf.pick_plan(grid, None) is grid
    grid, cut = plans([10] * 100, gf.BLOCK_M, gf.BLOCK_N)
    assert gf.pick_plan(grid, cut) is grid
    grid, cut = plans([3000, 2500, 4000], gb.BLOCK_M, gb.BLOCK_N)
    assert gb.plan_suits(cut) and gb.pick_plan(grid, cut) is cut
    lens = [1900, 2000, 2100, 100, 150]  # causal documents: cut lists 15.8 long, the grid's 17.1
    grid, cut = (plan_block_sparse(document_slices(lens, AttnMaskType.CAUSAL), sum(lens),
                                   sum(lens), gb.BLOCK_M, gb.BLOCK_N, cut_at_slices=c)
                 for c in (False, True))
    assert gb.plan_suits(grid) and not gb.plan_suits(cut) and gb.pick_plan(grid, cut) is cut
    monkeypatch.setattr(gb, "MIN_Q_TILES_PER_KEY_TILE", 1e9)  # no plan's lists long enough
    assert gb.pick_plan(grid, cut) is grid


def test_the_gluon_backward_rule_keeps_row_tma_for_grid_plans():
    """Row TMA (a partial tile's row intervals loaded with its Q) reads the row table laid out
    by slot on plans cut at the slices, but its speed there is not measured, so the rule picks it
    for grid plans only (here the grid plan of the same mask takes it)."""
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_backward as gb
    from magi_attention.testing import document_slices

    lens = [200, 90, 310, 150, 274]  # short documents: most visited pairs partial
    n = sum(lens)
    grid, cut = (plan_block_sparse(document_slices(lens), n, n, gb.BLOCK_M, gb.BLOCK_N,
                                   cut_at_slices=c) for c in (False, True))
    assert gb.row_tma_suits(grid) and not gb.row_tma_suits(cut)


def test_the_gluon_forward_plan_of_a_mask_is_cut_where_pick_plan_says():
    """kernels.triton's Gluon forward plan (what fwd and magi's local forwards run): cut at the
    slices for documents off the grid, the grid plan itself for a causal mask (nothing to cut);
    both kept in the mask, so a second call builds nothing."""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.plan import FlexAttnPlan
    from magi_attention.kernels.triton import _gluon_plan
    from magi_attention.testing import document_slices

    lens = (300, 1000, 700, 2500, 150, 1634)
    docs = FlexAttnPlan.from_slices(document_slices(lens), sum(lens), sum(lens))
    plan = _gluon_plan(docs, "cpu")
    assert plan.cut_at_slices and _gluon_plan(docs, "cpu") is plan
    causal = FlexAttnPlan.from_slices([AttnSlice.make(0, 4096, 0, 4096, 1)], 4096, 4096)
    assert not _gluon_plan(causal, "cpu").cut_at_slices
