"""scripts/dev/fwd_item_stamps.py on the CPU: the items' mapping to q tiles, heads and programs
(gluon_forward's static grid order) and the summary's fit, gaps and span on stamps made up with a
known per-item and per-tile cost. The stamps themselves come from the device machine."""
import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")


def _causal_plan(seqlen=1024):
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    return plan_block_sparse([AttnSlice.make(0, seqlen, 0, seqlen, 1)], seqlen, seqlen, 128, 128)


def test_items_map_to_q_tiles_heads_and_programs(load_script):
    """The plain order (q tiles fastest, head after head, programs striding)."""
    script = load_script("scripts/dev/fwd_item_stamps.py")
    plan = _causal_plan()  # 8 q tiles, q tile t lists t + 1 key tiles
    heads, programs = 3, 5
    rows = script.item_rows(plan, heads, programs, np.zeros((8 * heads, 2, 2), dtype=np.int64),
                            lpt=False)
    assert len(rows) == 2 * 8 * heads and set(rows.consumer) == {0, 1}
    one = rows[rows.consumer == 0].set_index("item")
    order = plan.q_tile_order.numpy()
    for item in (0, 7, 8, 23):
        assert one.loc[item, "q_tile"] == order[item % 8]
        assert one.loc[item, "head"] == item // 8
        assert one.loc[item, "program"] == item % programs
        assert one.loc[item, "turn"] == item // programs
        assert one.loc[item, "tiles"] == order[item % 8] + 1  # causal: its own tile and before


def test_lpt_items_run_heads_fastest_and_deal_turns_out_boustrophedon(load_script):
    """LPT_ITEMS: a KV head's q heads (here 2 of 4) fastest over the plan's heaviest-first q
    tiles, then the next KV head's; odd turns dealt from the last program back."""
    script = load_script("scripts/dev/fwd_item_stamps.py")
    plan = _causal_plan()
    heads, programs = 4, 5
    rows = script.item_rows(plan, heads, programs, np.zeros((8 * heads, 2, 2), dtype=np.int64),
                            lpt=True, group=2)
    one = rows[rows.consumer == 0].set_index("item")
    order = plan.q_tile_order.numpy()
    assert list(one.q_tile[:6]) == [order[0]] * 2 + [order[1]] * 2 + [order[2]] * 2
    assert list(one["head"][:6]) == [0, 1, 0, 1, 0, 1]
    assert list(one["head"][16:18]) == [2, 3] and list(one.q_tile[16:18]) == [order[0]] * 2
    assert list(one.program[:10]) == [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]
    assert list(one.turn[:10]) == [0] * 5 + [1] * 5


def test_summary_recovers_a_known_per_item_cost(load_script):
    script = load_script("scripts/dev/fwd_item_stamps.py")
    plan = _causal_plan()
    heads, programs = 4, 6
    n = 8 * heads
    rows = script.item_rows(plan, heads, programs, np.zeros((n, 2, 2), dtype=np.int64))
    # each program's items back to back, 200 ns apart; an item takes 3000 + 500 x tiles ns
    clock = {}
    for at in rows.sort_values(["program", "consumer", "turn"]).index:
        r = rows.loc[at]
        start = clock.get((r.program, r.consumer), 0)
        rows.loc[at, "start_ns"] = start
        rows.loc[at, "end_ns"] = start + 3000 + 500 * r.tiles
        clock[(r.program, r.consumer)] = rows.loc[at, "end_ns"] + 200
    got = script.summarise(rows)
    assert got["fixed_us"] == pytest.approx(3.0) and got["per_tile_us"] == pytest.approx(0.5)
    assert got["gap_median_us"] == pytest.approx(0.2)
    assert got["span_ms"] == pytest.approx(max(clock.values()) / 1e6 - 200 / 1e6)
    took = (rows.end_ns - rows.start_ns).sum()
    assert got["fixed_share"] == pytest.approx(3000 * len(rows) / took)
    assert got["timer_step_ns"] > 0


def test_compact_rows_keep_times_from_each_launchs_first_start(load_script):
    """--out's compact form: COMPACT_COLUMNS only, each (mask, seqlen, order) launch's times
    from its own first start, so the summary's span and busy time read the same from it once the
    schedule's columns are joined back."""
    import pandas as pd
    script = load_script("scripts/dev/fwd_item_stamps.py")
    plan = _causal_plan()
    stamps = np.arange(8 * 2 * 2 * 2, dtype=np.int64).reshape(8 * 2, 2, 2) * 10 + 5000
    rows = script.item_rows(plan, 2, 3, stamps, lpt=False)
    launches = pd.concat([rows.assign(mask="causal", seqlen=1024, lpt=False),
                          rows.assign(mask="causal", seqlen=1024, lpt=True, start_ns=rows.start_ns
                                      + 9000, end_ns=rows.end_ns + 9000)])
    out = script.compact(launches)
    assert list(out.columns) == script.COMPACT_COLUMNS
    for _, launch in out.groupby("lpt"):
        assert launch.start_ns.min() == 0
        assert (launch.end_ns - launch.start_ns).tolist() == (rows.end_ns - rows.start_ns).tolist()
    back = rows.drop(columns=["start_ns", "end_ns"]).merge(
        out[~out.lpt], on=["item", "consumer"])
    assert script.summarise(back)["span_ms"] == pytest.approx(script.summarise(rows)["span_ms"])
