"""The Triton forward's config choice: the plan's listed key tiles per q tile pick the short-row
config (8 warps, 128 registers) for documents and windows and keep the default for full and
causal masks, on the planner's real tile lists (no GPU: the plans are built on the CPU)."""
import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

from magi_attention.common import AttnMaskType, AttnSlice  # noqa: E402
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.plan import FlexAttnPlan  # noqa: E402
from magi_attention.kernels.triton import plan_tiles_per_q_tile  # noqa: E402
from magi_attention.kernels.triton.configs import SHORT_ROW_TILES, fwd_config  # noqa: E402
from magi_attention.testing import document_slices  # noqa: E402
from magi_attention.testing.masks import named_mask  # noqa: E402

S = 16384


def _docs(lens, causal):
    return document_slices(lens, AttnMaskType.CAUSAL if causal else AttnMaskType.FULL)


@pytest.mark.parametrize("name, slices, short", [
    ("full", [AttnSlice.make(0, S, 0, S, 0)], False),
    ("causal", [AttnSlice.make(0, S, 0, S, 1)], False),
    ("causal_documents_of_1k", _docs([1024] * 16, True), True),
    ("full_documents_of_2k", _docs([2048] * 8, False), True),
    ("one_document_of_12k_and_4_of_1k", _docs([12288] + [1024] * 4, True), False),
])
def test_short_rows_pick_the_short_row_config(name, slices, short):
    default = fwd_config(128)
    plan = plan_block_sparse(slices, S, S, default.block_m, default.block_n)
    tiles = plan_tiles_per_q_tile(plan)
    assert (tiles < SHORT_ROW_TILES) == short, f"{name}: {tiles:.1f} tiles per q tile"
    config = fwd_config(128, tiles)
    if short:
        assert (config.num_warps, config.max_registers) == (8, 128)
    else:
        assert config == default
    assert (config.block_m, config.block_n) == (plan.block_m, plan.block_n)


def test_empty_plan_counts_zero_tiles():
    plan = plan_block_sparse([], 0, 0, 128, 64)
    assert plan_tiles_per_q_tile(plan) == 0.0


@pytest.mark.parametrize("name, slices, seqlen, gluon", [
    ("full_1k", [AttnSlice.make(0, 1024, 0, 1024, 0)], 1024, True),  # 8 tiles per q tile
    ("causal_1k", [AttnSlice.make(0, 1024, 0, 1024, 1)], 1024, True),  # 4.5 (H100: 1.075)
    ("causal_2k", [AttnSlice.make(0, 2048, 0, 2048, 1)], 2048, True),  # 8.5
    ("causal_documents_of_512", _docs([512] * 16, True), 8192, False),  # 2.5
    ("full_documents_of_256", _docs([256] * 32, False), 8192, False),  # 2
    ("causal_documents_of_4k", _docs([4096] * 4, True), 16384, True),
])
def test_short_rows_keep_the_triton_forward(name, slices, seqlen, gluon):
    """gluon_forward.plan_suits on the 128x128 plan: where its measured ratio to the Triton
    forward is below 1 (few key tiles per q tile) the Triton forward runs."""
    gf = pytest.importorskip("magi_attention.kernels.triton.gluon_forward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N)
    assert gf.plan_suits(plan) == gluon, name


@pytest.mark.parametrize("name, slices, seqlen, gluon", [
    ("full_1k", [AttnSlice.make(0, 1024, 0, 1024, 0)], 1024, False),  # 16 q tiles per key tile
    ("full_2k", [AttnSlice.make(0, 2048, 0, 2048, 0)], 2048, True),  # 32
    ("causal_2k", [AttnSlice.make(0, 2048, 0, 2048, 1)], 2048, True),  # 17
    ("causal_documents_of_1k", _docs([1024] * 8, True), 8192, False),  # 9
    ("causal_documents_of_4k", _docs([4096] * 4, True), 16384, True),  # 33
])
def test_short_lists_keep_the_ordered_triton_backward(name, slices, seqlen, gluon):
    """gluon_backward.plan_suits on the 64x128 plan: where its measured ratio to the ordered
    Triton backward is below 1 (few q tiles per key tile) the Triton backward runs."""
    gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N)
    assert gb.plan_suits(plan) == gluon, name


@pytest.mark.parametrize("name, slices, seqlen, row_tma", [
    ("full", [AttnSlice.make(0, 4096, 0, 4096, 0)], 4096, False),  # 0% partial
    ("causal", [AttnSlice.make(0, 4096, 0, 4096, 1)], 4096, False),  # 6%
    ("causal_documents_of_512", _docs([512] * 8, True), 4096, True),  # 40%
    ("two_intervals_per_row", [AttnSlice.make(0, 4096, 0, 64, 0),
                               AttnSlice.make(0, 4096, 1024, 1536, 0)], 4096,
     False),  # partial tiles, but a row keeps two key intervals: no single bound pair
])
def test_row_intervals_travel_by_tma_where_partial_tiles_are_many(name, slices, seqlen, row_tma):
    """gluon_backward.row_tma_suits: one interval per row and at least MIN_PARTIAL_FOR_ROW_TMA
    of the listed tiles partial; counted on the host (full_pairs is kept at build time)."""
    gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N)
    pairs = plan.tile_pairs()
    assert plan.num_full_pairs == sum(pairs.values())  # the build-time count, checked by hand
    assert gb.row_tma_suits(plan) == row_tma, name


@pytest.mark.parametrize("name, slices, seqlen, early", [
    ("full_16k", [AttnSlice.make(0, 16384, 0, 16384, 0)], 16384, True),  # 256 q tiles a list
    ("causal_16k", [AttnSlice.make(0, 16384, 0, 16384, 1)], 16384, True),  # 129
    ("full_4k", [AttnSlice.make(0, 4096, 0, 4096, 0)], 4096, True),  # 64: the bound itself
    ("causal_4k", [AttnSlice.make(0, 4096, 0, 4096, 1)], 4096, False),  # 33
    ("causal_documents_of_2k", _docs([2048] * 8, True), 16384, False),  # 16.5
])
def test_long_lists_release_the_q_slot_before_the_dq_add(name, slices, seqlen, early):
    """gluon_backward.early_empty_suits: the early release of a step's Q / dO slot from
    EARLY_EMPTY_MIN_Q_TILES q tiles a key tile on average (+1.3% on full 16k, -8%
    on causal_document 16k's 17), counted on the host."""
    gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N)
    assert gb.early_empty_suits(plan) == early, (name, plan.k_tile_qt.numel() / plan.num_k_tiles)


@pytest.mark.parametrize("name, slices, seqlen, group, chunks", [
    ("full_16k", [AttnSlice.make(0, 16384, 0, 16384, 0)], 16384, 8, 8),  # 256 q tiles a list
    ("causal_documents_of_2k", _docs([2048] * 8, True), 16384, 8, 4),  # 16.5: 33 steps at 4
    ("causal_documents_of_1k", _docs([1024] * 16, True), 16384, 8, 2),  # 8.5: 34 steps at 2
    ("causal_documents_of_512", _docs([512] * 16, True), 8192, 8, 1),  # 4.5: 36 at 1
    ("no_gqa", [AttnSlice.make(0, 16384, 0, 16384, 0)], 16384, 1, 1),
    ("group_of_6", _docs([2048] * 8, True), 16384, 6, 3),  # 16.5 x 2 heads = 33 steps
    ("sliding_window_causal", named_mask("sliding_window_causal", 16384), 16384, 8,
     1),  # 17.4 q tiles every key tile (cv 0.14): the programs do not drift over heads
    ("full_4k", [AttnSlice.make(0, 4096, 0, 4096, 0)], 4096, 8, 1),  # equal lists of 64
])
def test_head_chunks_leave_each_program_enough_steps(name, slices, seqlen, group, chunks):
    """gluon_backward.head_chunks_for: one program per kv head where the lists are short and
    of one length; else the most programs a key tile (a divisor of the group) that keep
    MIN_STEPS_PER_PROGRAM steps of the mean q-tile list each (host counts only)."""
    gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N)
    assert plan.k_list_cv == pytest.approx(np.std(lists := np.diff(plan.k_tile_ptr.numpy()))
                                           / np.mean(lists))
    got = gb.head_chunks_for(plan, group)
    assert got == chunks, (name, got, plan.k_tile_qt.numel() / plan.num_k_tiles)
    assert group % got == 0


def test_gluon_forward_names_why_it_does_not_run(monkeypatch):
    """Off Hopper and on another Triton release (Gluon's API moves) the reason is given and the
    Triton forward runs instead."""
    gf = pytest.importorskip("magi_attention.kernels.triton.gluon_forward")
    q = torch.zeros(128, 2, 128, dtype=torch.bfloat16)
    assert "sm90" in gf.unsupported_reason(q, q, 0.0, False)  # a CPU tensor
    monkeypatch.setattr(gf.triton, "__version__", "3.5.1")
    assert "Triton 3.6" in gf.unsupported_reason(q, q, 0.0, False)


def test_gluon_backward_names_why_it_does_not_run(monkeypatch):
    """The Gluon backward refuses non-Hopper inputs, deterministic=True (its dq reduce-adds have
    no fixed order) and softcap."""
    from magi_attention.kernels import triton as tk
    gb = pytest.importorskip("magi_attention.kernels.triton.gluon_backward")
    q = torch.zeros(128, 2, 128, dtype=torch.bfloat16)
    assert "sm90" in tk._gluon_bwd_reason(q, q, 0.0, False)  # a CPU tensor
    gf = pytest.importorskip("magi_attention.kernels.triton.gluon_forward")
    monkeypatch.setattr(gf, "_triton_version", lambda: (3, 6))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    assert gb.unsupported_reason(q, q, 0.0, False) is None
    assert "deterministic" in gb.unsupported_reason(q, q, 0.0, True)
    assert "softcap" in gb.unsupported_reason(q, q, 1.0, False)


def test_the_default_kernel_choice_is_made_once_per_mask_and_kind_of_input(monkeypatch):
    """tk.fwd / tk.bwd without a config decide Gluon or Triton (and the forward's short-row
    config) on the first call for a mask and kind of input; later calls look the choice up:
    the reasons are not asked again. A new dtype is a new choice."""
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton import backward, forward
    asked = []
    monkeypatch.setattr(tk, "check_supported", lambda q, k, v: None)
    monkeypatch.setattr(tk, "_gluon_reason", lambda *a: asked.append("fwd") or "off")
    monkeypatch.setattr(tk, "_gluon_bwd_reason", lambda *a: asked.append("bwd") or "off")
    launched = []
    monkeypatch.setattr(forward, "launch_fwd", lambda q, k, v, plan, config, *a: launched.append(
        (plan, config)))
    monkeypatch.setattr(backward, "launch_bwd", lambda *a, **kw: launched.append(a[6:9]))
    mask = FlexAttnPlan.from_slices([AttnSlice.make(0, 256, 0, 256, "causal")], 256, 256)
    q = torch.zeros(256, 2, 128, dtype=torch.bfloat16)
    for _ in range(3):
        tk.fwd(q, q, q, mask, 1.0)
        tk.bwd(q, q, q, q, q, torch.zeros(256, 2), mask, 1.0)
    assert asked == ["fwd", "bwd"]
    assert launched[0] == launched[2] == launched[4]  # the same plan and config each time
    assert launched[0][1] == fwd_config(128, tk.plan_tiles_per_q_tile(launched[0][0]))
    tk.fwd(q.half(), q.half(), q.half(), mask, 1.0)
    tk.fwd(q, q, q, mask, 1.0)
    assert asked == ["fwd", "bwd", "fwd"]


@pytest.mark.parametrize("head_dim", [16, 32, 64, 128, 256])
def test_power_of_two_head_dims_up_to_256_are_taken(head_dim):
    from magi_attention.kernels.triton import head_dim_reason
    assert head_dim_reason(head_dim) is None


@pytest.mark.parametrize("head_dim", [8, 48, 96, 112, 192, 272, 512])
def test_other_head_dims_get_a_clear_reason(head_dim):
    """Triton's tiles are powers of two: head_dim 96 failed to compile ("Shape element 1 must be
    a power of 2") where it was accepted as a multiple of 16."""
    from magi_attention.kernels.triton import head_dim_reason
    reason = head_dim_reason(head_dim)
    assert reason is not None and "power of two" in reason and str(head_dim) in reason


def test_head_dim_256_takes_the_wide_tiles_whatever_its_rows():
    from magi_attention.kernels.triton.configs import (BWD_WIDE, FWD_WIDE, SHORT_ROW_TILES,
                                                       bwd_config, fwd_config)
    assert fwd_config(256) == fwd_config(256, SHORT_ROW_TILES - 1) == FWD_WIDE
    assert bwd_config(256) == BWD_WIDE
    assert fwd_config(128) != FWD_WIDE and bwd_config(128) != BWD_WIDE


def _gluon_or_none(slices, seqlen):
    """The Gluon forward's plan where it suits (as the route sees it), else None."""
    gf = pytest.importorskip("magi_attention.kernels.triton.gluon_forward")
    plan = plan_block_sparse(slices, seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N)
    return plan if gf.plan_suits(plan) else None


@pytest.mark.parametrize("name, group, head_dim, max_logits, packs", [
    ("full", 8, 128, False, False),  # Gluon's plan suits, one interval a row: Gluon (630 vs 514)
    ("causal_document", 8, 128, False, False),  # a tie with Gluon (396 vs 391): Gluon stays
    ("qk_sparse", 8, 128, False, True),  # 5 intervals a row: packed 466 against Gluon's 382
    ("block_sparse", 8, 128, False, True),  # no row table (Gluon does not run): 500 vs 26
    ("hash_sparse", 4, 64, False, True),
    ("block_sparse", 1, 128, False, False),  # MHA: nothing to pack
    ("block_sparse", 3, 128, False, False),  # 128-row tiles do not hold whole groups of 3
    ("block_sparse", 8, 256, False, False),  # head_dim 256: not timed packed
    ("block_sparse", 8, 128, True, False),  # max logits are kept per (q tile, head)
])
def test_pack_gqa_runs_where_it_was_measured_to_win(name, group, head_dim, max_logits, packs):
    from magi_attention.kernels import triton as tk
    slices = named_mask(name, S, seed=0)
    config = tk._pack_config(_gluon_or_none(slices, S), group, head_dim, max_logits)
    assert (config is not None) == packs
    assert config is None or config.pack_gqa


def test_the_packed_plan_holds_block_sparse_blocks_whole():
    """Why PackGQA wins on block_sparse (64 x 64 blocks): 128-row q tiles straddle two q blocks
    with different keys, so most of their tiles are partial (masked from the slice list); the
    packed plan's 16-position q tiles (GQA 8) lie inside one block: every tile is full."""
    from magi_attention.kernels.triton.configs import pack_config
    slices = named_mask("block_sparse", 4096, seed=0)
    config = pack_config(128, 8)
    unpacked = plan_block_sparse(slices, 4096, 4096, config.block_m, config.block_n)
    packed = plan_block_sparse(slices, 4096, 4096, config.block_m // 8, config.block_n)
    assert unpacked.num_full_pairs < unpacked.q_tile_kt.numel() / 2
    assert packed.num_full_pairs == packed.q_tile_kt.numel() > 0
    # the group's rows in one tile: a quarter of the q heads' tile work, not more
    assert packed.q_tile_kt.numel() < 0.6 * 8 * unpacked.q_tile_kt.numel()


def test_the_route_picks_pack_gqa_once_and_plans_its_short_q_tiles(monkeypatch):
    """tk.fwd without a config on a GQA block_sparse mask launches the packed config on the plan
    of block_m // group positions (decided once); the same mask with MHA heads does not pack."""
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton import forward
    monkeypatch.setattr(tk, "check_supported", lambda q, k, v: None)
    monkeypatch.setattr(tk, "_gluon_reason", lambda *a: "off")
    launched = []
    monkeypatch.setattr(forward, "launch_fwd", lambda q, k, v, plan, config, *a: launched.append(
        (plan, config)))
    slices = named_mask("block_sparse", 2048, seed=0)
    mask = FlexAttnPlan.from_slices(slices, 2048, 2048)
    q, k = torch.zeros(2048, 8, 128, dtype=torch.bfloat16), torch.zeros(2048, 1, 128, dtype=torch.bfloat16)
    tk.fwd(q, k, k, mask, 1.0)
    tk.fwd(q, k, k, mask, 1.0)
    (plan, config), again = launched
    assert config.pack_gqa and plan.block_m == config.block_m // 8 and again == (plan, config)
    tk.fwd(q, q, q, mask, 1.0)  # group 1: its own route (the group is part of the choice's key)
    assert not launched[-1][1].pack_gqa and launched[-1][0].block_m == launched[-1][1].block_m


def test_pack_gqa_refuses_what_it_cannot_run():
    from magi_attention.kernels.triton.configs import pack_config
    from magi_attention.kernels.triton.forward import pack_gqa_reason
    config = pack_config(128, 8)
    assert pack_gqa_reason(config, 64, 8, False) is None
    assert "multiple" in pack_gqa_reason(config, 6, 2, False)  # group 3
    assert "max logits" in pack_gqa_reason(config, 64, 8, True)
