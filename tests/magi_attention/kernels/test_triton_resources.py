"""scripts/dev/triton_resources.py: the Triton kernels compiled for sm90 on a machine without a
GPU, and the ptxas report of their registers, spills and shared memory; the register cap of a
config (max_registers -> Triton's maxnreg) reaches ptxas."""
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from magi_attention.kernels.triton.configs import BwdConfig, FwdConfig, launch_options  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_launch_options_pass_the_register_cap_only_when_set():
    assert launch_options(FwdConfig(128, 64, 4, 3)) == {"num_warps": 4, "num_stages": 3}
    assert launch_options(BwdConfig(64, 64, 64, 64, 8, 2, max_registers=128)) == {
        "num_warps": 8, "num_stages": 2, "maxnreg": 128}


@pytest.fixture(scope="module")
def tool(load_script):
    if torch.cuda.is_available():
        pytest.skip("the compile-only driver is for machines without a GPU")
    yield load_script("scripts/dev/triton_resources.py")
    sys.path[:] = [p for p in sys.path if not p.startswith(str(ROOT / "scripts"))]


def _compile_fwd(tool, config):
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton.forward import launch_fwd
    q, k, v, _ = tool._inputs(256, hq=4, hk=1, d=128)
    plan = plan_block_sparse([AttnSlice.make(0, 256, 0, 256, 1)], 256, 256, config.block_m,
                             config.block_n)
    driver = triton.runtime.driver._active
    with tool.CompileRecorder() as rec:
        launch_fwd(q, k, v, plan, config, 128 ** -0.5, 0.0, False)
    assert triton.runtime.driver._active is driver  # the driver is restored
    (name, kernel), = rec.compiled
    assert name == "_fwd_kernel"
    return tool.resources(kernel)


def test_a_forward_config_compiles_for_sm90_and_its_register_cap_holds(tool):
    free = _compile_fwd(tool, FwdConfig(128, 64, 8, 3, 2))
    capped = _compile_fwd(tool, FwdConfig(128, 64, 8, 3, 2, max_registers=96))
    assert 0 < free["registers"] <= 255 and free["num_warps"] == 8 and free["shared_kb"] > 0
    assert capped["registers"] <= 96 < free["registers"]
    # 8 warps at <= 96 registers: the register file holds two programs where it held one
    assert capped["programs_per_sm"] >= 2 * (free["programs_per_sm"] if free["registers"] > 128 else 1)


def test_the_two_forward_configs_fit_two_programs_per_sm_without_spills(tool):
    """The default and the short-row forward (configs.fwd_config) as they compile for sm90: the
    short-row one at 8 warps and 128 registers must not spill and must keep two programs per SM
    (what its measured gain on documents rests on)."""
    from magi_attention.kernels.triton.configs import SHORT_ROW_TILES, fwd_config
    default, short = fwd_config(128), fwd_config(128, SHORT_ROW_TILES - 1)
    assert (short.block_m, short.block_n) == (default.block_m, default.block_n)  # one plan
    res = _compile_fwd(tool, short)
    assert res["num_warps"] == 8 and res["registers"] <= 128
    assert res["spill_stores"] == 0 and res["programs_per_sm"] == 2
    assert _compile_fwd(tool, default)["programs_per_sm"] == 2


@pytest.mark.parametrize("head_dim", [128, 64])
def test_the_gluon_forward_compiles_for_sm90_with_its_register_split(tool, head_dim):
    """kernels.triton.gluon_forward built for sm90 on the CPU: 12 warps (two consumer
    warpgroups and the producer's), no spills, its K/V ring in shared memory, and setmaxnreg
    moving registers to the consumers; masks with one and with two intervals per row."""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    for slices in ([AttnSlice.make(0, 1531, 0, 1531, 1)],
                   [AttnSlice.make(0, 700, 0, 700, 1), AttnSlice.make(700, 1531, 700, 1531, 1),
                    AttnSlice.make(700, 1531, 0, 100, 0)]):
        q, k, v, _ = tool._inputs(1531, hq=8, hk=2, d=head_dim)
        plan = plan_block_sparse(slices, 1531, 1531, gf.BLOCK_M, gf.BLOCK_N)
        with tool.CompileRecorder() as rec:
            gf.launch_fwd(q, k, v, plan, head_dim ** -0.5)
        (name, kernel), = rec.compiled
        res = tool.resources(kernel)
        assert name == "_fwd_kernel" and res["num_warps"] == 12
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0
        ring = 2 * gf.NUM_BUF * gf.BLOCK_N * head_dim * 2 + gf.BLOCK_M * head_dim * 2
        assert ring / 1024 <= res["shared_kb"] <= 227
        ptx = kernel.asm["ptx"]
        assert f"setmaxnreg.inc.sync.aligned.u32 \t{gf.CONSUMER_REGS}" in ptx
        assert f"setmaxnreg.dec.sync.aligned.u32 \t{gf.PRODUCER_REGS}" in ptx


def test_the_gluon_forward_on_cut_tiles_compiles_without_spills(tool):
    """A plan cut at the slices builds its own kernel (CUT): no spills with one interval a row
    (the short-row kernel, its mask loads hoisted), two (not hoisted) and long rows (the
    softmax under the PV); it stores a short q tile's rows by plain 16-bit stores, which the
    grid plan's kernel of the same mask does not have (its SASS is the one before cut tiles)."""
    from magi_attention.common import AttnMaskType, AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    from magi_attention.testing import document_slices
    cases = {"one interval": (document_slices([700, 831], AttnMaskType.CAUSAL), 1531),
             "two intervals": ([AttnSlice.make(0, 700, 0, 700, 1),
                                AttnSlice.make(700, 1531, 700, 1531, 1),
                                AttnSlice.make(700, 1531, 0, 100, 0)], 1531),
             "long rows": (document_slices([1000, 2100]), 3100)}
    for name, (slices, seqlen) in cases.items():
        q, k, v, _ = tool._inputs(seqlen, hq=8, hk=2, d=128)
        stores = {}
        for cut in (False, True):
            plan = plan_block_sparse(slices, seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N,
                                     cut_at_slices=cut)
            with tool.CompileRecorder() as rec:
                gf.launch_fwd(q, k, v, plan, 128 ** -0.5)
            (_, kernel), = rec.compiled
            res = tool.resources(kernel)
            assert res["spill_stores"] == 0 and res["spill_loads"] == 0, (name, cut, res)
            stores[cut] = _sass(kernel).count("STG.E.U16")
        assert stores[False] == 0 and stores[True] > 0, (name, stores)


def test_the_gluon_backward_on_cut_tiles_compiles_with_few_spills(tool):
    """gluon_backward over a plan cut at the slices builds for sm90 without spills, its partial
    tiles masked by the row table or by row TMA, as the grid plan's kernel (session 67's form,
    which read each step's first q row from q_starts in the consumers, spilled 16-28 bytes)."""
    import torch
    from magi_attention.common import AttnMaskType
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_backward as gb
    from magi_attention.testing import document_slices
    slices = document_slices([700, 831, 517], AttnMaskType.CAUSAL)
    q, k, v, _ = tool._inputs(2048, hq=8, hk=2, d=128)
    out, lse, dout = torch.empty_like(q), torch.zeros(2048, 8), torch.empty_like(q)
    spills = {}
    for row_tma in (False, True):
        for cut in (False, True):
            plan = plan_block_sparse(slices, 2048, 2048, gb.BLOCK_M, gb.BLOCK_N,
                                     cut_at_slices=cut)
            with tool.CompileRecorder() as rec:
                gb.launch_bwd(dout, q, k, v, out, lse, plan, 128 ** -0.5, row_tma=row_tma)
            kernel = [kk for name, kk in rec.compiled if name == "_bwd_kernel"][0]
            res = tool.resources(kernel)
            spills[row_tma, cut] = res["spill_stores"] + res["spill_loads"]
    assert not any(spills.values()), spills


def test_the_gluon_forward_that_waits_for_arriving_keys_compiles_for_sm90(tool):
    """gluon_forward with an Arrival (items fetched from a counter, the producer spinning on
    the flag before keys in flight) builds for sm90 with the strided grid's resources: 12 warps,
    168 registers, no spills; the counter's add is one lane's, the flag read volatile."""
    import numpy as np
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    q, k, v, _ = tool._inputs(1531, hq=8, hk=2, d=128)
    plan = plan_block_sparse([AttnSlice.make(0, 1531, 0, 1531, 1)], 1531, 1531, gf.BLOCK_M,
                             gf.BLOCK_N)
    late = gf.late_tiles(plan.num_k_tiles, plan.block_n, [(1024, 1531)])
    order, n_first = gf.arrival_order(plan, late)
    arrival = gf.Arrival(torch.zeros(1, dtype=torch.int32), torch.from_numpy(late),
                         torch.from_numpy(order), n_first)
    with tool.CompileRecorder() as rec:
        gf.launch_fwd(q, k, v, plan, 128 ** -0.5, arrival=arrival)
    (name, kernel), = rec.compiled
    res = tool.resources(kernel)
    assert name == "_fwd_kernel" and res["num_warps"] == 12 and res["registers"] == gf.MAXNREG
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0
    ptx = kernel.asm["ptx"]
    assert "atom.global.gpu.acq_rel.add.u32" in ptx and "ld.volatile.global.b32" in ptx
    assert np.array_equal(order, [7, 6, 5, 4, 3, 2, 1, 0, 11, 10, 9, 8]) and n_first == 8


def test_the_gluon_forward_runs_the_softmax_under_the_pv_mma_and_turns_on_named_barriers(tool):
    """The SASS of kernels.triton.gluon_forward's main loop (each consumer's copy): with
    under_pv, after the wait for S_j (DEPBAR 1) the softmax's 64 exp2 of each thread come before
    the wait for P_{j-1} V_{j-1} (DEPBAR 0), so they run under that MMA; with the plain wait
    (under_pv False, what plans of short rows get) ptxas moves it above the softmax and none do
    (session 62: [0, 0]). The plan rule: a causal 1024 plan (4.5 key tiles per q tile) takes
    the plain wait, a full 8192 one (64) the other. The turns are handed over on named
    barriers TURN_BARRIER and TURN_BARRIER + 1 (256 threads)."""
    import re
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    q, k, v, _ = tool._inputs(1024, hq=8, hk=2, d=128)
    plan = plan_block_sparse([AttnSlice.make(0, 1024, 0, 1024, 0)], 1024, 1024, gf.BLOCK_M,
                             gf.BLOCK_N)
    long_rows = plan_block_sparse([AttnSlice.make(0, 8192, 0, 8192, 0)], 8192, 8192,
                                  gf.BLOCK_M, gf.BLOCK_N)
    assert not gf.under_pv_suits(plan) and gf.under_pv_suits(long_rows)
    exp2 = {}
    for under_pv in (True, False):
        with tool.CompileRecorder() as rec:
            gf.launch_fwd(q, k, v, plan, 128 ** -0.5, under_pv=under_pv)
        sass = _sass(rec.compiled[0][1])
        between = re.findall(r"DEPBAR\.LE gsb0, 0x1 ;(.*?)DEPBAR\.LE gsb0, 0x0 ;", sass, re.S)
        exp2[under_pv] = sorted(part.count("MUFU.EX2") for part in between)
        for bar in (gf.TURN_BARRIER, gf.TURN_BARRIER + 1):
            assert f"BAR.SYNC.DEFER_BLOCKING {bar:#x}, 0x100 ;" in sass
            assert f"BAR.ARV {bar:#x}, 0x100 ;" in sass
    # both consumers' loops: P's 64 and the two rows' rescale factors
    assert len(exp2[True]) >= 2 and exp2[True][-2] >= 64, exp2
    assert max(exp2[False], default=0) < 64, exp2


def _sass(kernel) -> str:
    """The SASS of a compiled kernel (ptxas and nvdisasm shipped with Triton)."""
    return _sass_of_ptx(kernel.asm["ptx"])


def _sass_of_ptx(ptx_text: str) -> str:
    import os
    import subprocess
    import tempfile
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(ptx, "w") as f:
            f.write(ptx_text)
        subprocess.run([os.path.join(bin_dir, "ptxas"), "-arch=sm_90a", ptx, "-o", cubin],
                       check=True)
        return subprocess.run([os.path.join(bin_dir, "nvdisasm"), "-c", cubin],
                              capture_output=True, text=True, check=True).stdout


# A Gluon kernel compiled in a fresh process with its module's switches set (a switch is read
# at compile, once a process): the preamble sets them on ``gk``, a body compiles and writes the
# kernel's PTX to stdout
_ARM_PREAMBLE = """
import sys
sys.path[:0] = [{root!r}, {root!r} + "/scripts/dev"]
import importlib
import torch
import triton_resources as tool
from module_switches import set_switch
from magi_attention.common import AttnSlice
from magi_attention.kernels.block_sparse import plan_block_sparse
gk = importlib.import_module({module!r})
for name, value in {switches}.items():
    set_switch(gk, name, value)
"""
# a causal plan's Gluon forward, built for short rows (under_pv False, where the short-row
# switches apply) or long ones
_FWD_ARM = """
q, k, v, _ = tool._inputs(2048, hq=8, hk=2, d=128)
plan = plan_block_sparse([AttnSlice.make(0, 2048, 0, 2048, 1)], 2048, 2048, 128, 128)
with tool.CompileRecorder() as rec:
    gk.launch_fwd(q, k, v, plan, 128 ** -0.5, under_pv=UNDER_PV)
sys.stdout.write(rec.compiled[0][1].asm["ptx"])
"""
_SHORT_ROWS = "UNDER_PV = False\n" + _FWD_ARM
_LONG_ROWS = "UNDER_PV = True\n" + _FWD_ARM
# a full plan's Gluon backward
_BWD_ARM = """
q, k, v, do = tool._inputs(4096, hq=8, hk=1, d=128)
plan = plan_block_sparse([AttnSlice.make(0, 4096, 0, 4096, 0)], 4096, 4096, 64, 128)
with tool.CompileRecorder() as rec:
    gk.launch_bwd(do, q, k, v, q, torch.zeros(4096, 8), plan, 128 ** -0.5)
sys.stdout.write(dict(rec.compiled)["_bwd_kernel"].asm["ptx"])
"""


def _bwd_sass(**switches) -> str:
    """The SASS of _BWD_ARM's backward built with gluon_backward's ``switches``."""
    return _arm_sass(_BWD_ARM, "magi_attention.kernels.triton.gluon_backward", **switches)


def _arm_sass(body: str = _SHORT_ROWS, module: str = "magi_attention.kernels.triton.gluon_forward",
              **switches) -> str:
    """The SASS of ``body``'s kernel built in a fresh process with ``module``'s ``switches``."""
    import subprocess
    code = _ARM_PREAMBLE.format(root=str(ROOT), module=module, switches=switches) + body
    return _sass_of_ptx(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                       text=True, check=True).stdout)


def test_the_gluon_forward_keeps_partial_tile_loads_off_the_s_wait(tool):
    """gluon_forward.HOIST_MASK_LOADS (on for short rows): a partial tile's key tile index is
    loaded before the wait for S_j and the rows' interval once an item, so no global load sits
    between that wait and the softmax (with the switch off one does in each consumer's loop:
    the mask waits a round trip); and it compiles without spills."""
    import re
    sass = {hoist: _arm_sass(HOIST_MASK_LOADS=hoist) for hoist in (False, True)}
    for hoist, text in sass.items():
        # each consumer's loop: from the S wait (DEPBAR 1) to the softmax's first exp2
        spans = re.findall(r"DEPBAR\.LE gsb0, 0x1 ;(.*?)MUFU\.EX2", text, re.S)
        loads = [span.count("LDG") for span in spans]
        assert len(loads) >= 2, loads
        assert (max(loads) == 0) if hoist else (min(loads) > 0), (hoist, loads)
    assert "STL" not in sass[True]  # no spill stores


def test_the_gluon_forward_prefetches_the_next_item_without_spills(tool):
    """gluon_forward.PREFETCH_ITEM (on for short rows), alone and with HOIST_MASK_LOADS (the
    default): the next item's q tile is loaded at this item's start and its list span (three
    loads) after this item's last PV, before its epilogue's store drains, so the next item
    starts on values in registers; without it those loads wait at the next item's start
    (none there, session 63: [0, 0]). The consumers' extra live scalars spill nothing."""
    import re
    # each consumer's item end: from its last PV wait to its O store's drain
    item_end = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0 ;((?:(?!WARPGROUP\.DEPBAR).)*?)"
                          r"DEPBAR\.LE SB0, 0x0 ;", re.S)
    neither = {"PREFETCH_ITEM": False, "HOIST_MASK_LOADS": False}
    for switches in (neither, {"PREFETCH_ITEM": True, "HOIST_MASK_LOADS": False}, {}):
        text = _arm_sass(**switches)
        loads = [span.count("LDG") for span in item_end.findall(text)]
        assert len(loads) == 2, (switches, loads)
        assert loads == ([0, 0] if switches is neither else [3, 3]), (switches, loads)
        assert "STL" not in text, switches


def _causal_gluon_fwd(tool, **launch):
    """The Gluon forward of a causal 2048-token plan (16 q tiles, 8:2 heads, d128) compiled in
    this process with launch_fwd's ``launch`` arguments: (kernel, its SASS), asserted free of
    spill stores."""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    q, k, v, _ = tool._inputs(2048, hq=8, hk=2, d=128)
    plan = plan_block_sparse([AttnSlice.make(0, 2048, 0, 2048, 1)], 2048, 2048, gf.BLOCK_M,
                             gf.BLOCK_N)
    with tool.CompileRecorder() as rec:
        gf.launch_fwd(q, k, v, plan, 128 ** -0.5, **launch)
    kernel = rec.compiled[0][1]
    assert tool.resources(kernel)["spill_stores"] == 0, launch
    return kernel, _sass(kernel)


def test_the_gluon_forward_item_stamps_read_the_timer_four_times_without_spills(tool):
    """launch_fwd(stamps=) builds a kernel that reads the global timer at each consumer's item
    start and end (four reads), with no spills; without stamps it reads none."""
    import torch
    stamps = torch.zeros(16 * 8, 2, 2, dtype=torch.int64)  # an item a q tile and head
    reads = {on: _causal_gluon_fwd(tool, stamps=stamps if on else None)[1].count("GLOBALTIMER")
             for on in (False, True)}
    assert reads == {False: 0, True: 4}


def test_the_gluon_forward_short_row_switches_leave_long_rows_alone(tool):
    """The short-row switches (HOIST_MASK_LOADS, PREFETCH_ITEM: session 64, -3.3% on full 16k)
    change nothing where the softmax runs under the PV: the long-row kernel's SASS is the same
    with them on (the default) and off."""
    off = _arm_sass(_LONG_ROWS, HOIST_MASK_LOADS=False, PREFETCH_ITEM=False)
    assert _arm_sass(_LONG_ROWS) == off
    assert _arm_sass(_SHORT_ROWS) != _arm_sass(_SHORT_ROWS, HOIST_MASK_LOADS=False,
                                               PREFETCH_ITEM=False)


def test_the_gluon_backward_early_release_passes_one_warpgroup_barrier_fewer(tool):
    """gluon_backward's early release of a step's Q_i / dO_i slot (right after dK's MMA, beside
    the dS exchange's release, not after the dQ add; on by the rule for this full plan's 64 q
    tiles a key tile): one warpgroup barrier fewer a consumer's step than the late release
    (session 63: nine a step in its PTX), the same spills."""
    early, late = _bwd_sass(), _bwd_sass(EARLY_EMPTY_MIN_Q_TILES=1e9)
    bar = "BAR.SYNC.DEFER_BLOCKING 0x2, 0x80 ;"
    assert late.count(bar) - early.count(bar) == 1, (early.count(bar), late.count(bar))
    assert early.count("STL") == late.count("STL")


def _step_loop_counts(sass: str) -> dict:
    """Summed over the SASS's step loops (each from its predicated back-edge branch's target to
    that branch, where the span holds an HGMMA): LDL/STL, HGMMA and warpgroup barrier counts."""
    import re
    lines = sass.splitlines()
    at, label, body = {}, None, []
    for line in lines:
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            label = m.group(1)
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            addr = int(m.group(1), 16)
            body.append((addr, m.group(2).strip()))
            if label:
                at[label], label = addr, None
    counts = {"LDL/STL": 0, "HGMMA": 0, "BAR.SYNC": 0, "loops": 0}
    for addr, text in body:
        m = re.search(r"\((\.L_x_\d+)\)", text)
        if not (text.startswith("@") and "BRA" in text and m and at[m.group(1)] < addr):
            continue
        span = [t for a, t in body if at[m.group(1)] <= a <= addr]
        if any(t.startswith("HGMMA") for t in span):
            counts["loops"] += 1
            counts["LDL/STL"] += sum(t.startswith(("LDL", "STL")) for t in span)
            counts["HGMMA"] += sum(t.startswith("HGMMA") for t in span)
            counts["BAR.SYNC"] += sum(t.startswith("BAR.SYNC") for t in span)
    return counts


def test_the_gluon_backward_kv_views_per_step_take_the_spills_out_of_the_step_loops(tool):
    """gluon_backward.KV_VIEWS_PER_STEP (on by default since session 65): K_c and V_c's views
    indexed anew each step (c + (j >> 31)) rather than hoisted with their 16 wgmma descriptors,
    which stayed live across the step loop and spilled. This full plan: 18 LDL/STL in the two
    consumers' step loops off (64 spill bytes), none on (session 64, CPU compile); the same
    HGMMAs and warpgroup barriers in the loops, and no more spill stores in the kernel."""
    off, on = _bwd_sass(KV_VIEWS_PER_STEP=False), _bwd_sass()
    loops_off, loops_on = _step_loop_counts(off), _step_loop_counts(on)
    assert loops_off["loops"] == loops_on["loops"] == 2, (loops_off, loops_on)
    assert loops_on["LDL/STL"] < loops_off["LDL/STL"], (loops_off, loops_on)
    assert (loops_on["HGMMA"], loops_on["BAR.SYNC"]) == (loops_off["HGMMA"],
                                                         loops_off["BAR.SYNC"])
    assert on.count("STL") <= off.count("STL")


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_gluon_backward_compiles_for_sm90_with_asynchronous_mmas(tool, head_dim):
    """kernels/triton/gluon_backward.py builds for sm90: 12 warps, the setmaxnreg split, dQ by
    TMA reduce-adds, and its wgmmas stay asynchronous. ptxas silently serialises every wgmma
    (a wait after each) when an MMA may still be in flight across the loop's back edge; session
    22 hit that, so the SASS's waits are counted: a few per step, not one per wgmma."""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_backward as gb
    from magi_attention.kernels.triton import gluon_forward as gf
    q, k, v, do = tool._inputs(1024, hq=8, hk=2, d=head_dim)
    plan = plan_block_sparse([AttnSlice.make(0, 1024, 0, 1024, 1)], 1024, 1024, gb.BLOCK_M,
                             gb.BLOCK_N)
    built = {}
    for row_tma, chunks in ((False, 1), (True, 1), (False, 2)):
        with tool.CompileRecorder() as rec:
            gb.launch_bwd(do, q, k, v, q, torch.zeros(1024, 8), plan, head_dim ** -0.5,
                          row_tma=row_tma, head_chunks=chunks)
        built[row_tma, chunks] = dict(rec.compiled)["_bwd_kernel"]
    # the consumers hold dK, dV, S and dP in 240 registers: a few scalars spill (session 23: 60
    # bytes at d128 once lse2/delta came by TMA, 144 before; 80 with the row intervals by TMA;
    # session 35: 64, and 96 where head chunks add fp32 dK/dV after the loop)
    spills = {r: tool.resources(kn)["spill_stores"] for r, kn in built.items()}
    assert spills[False, 1] <= (64 if head_dim == 128 else 0), spills
    assert spills[True, 1] <= (88 if head_dim == 128 else 0), spills
    assert spills[False, 2] <= (96 if head_dim == 128 else 0), spills
    # five key intervals a row (qk_sparse): the partial tiles' table loop stays a loop (unrolled,
    # the consumers spilled 1416 bytes; session 40)
    from bench.masks import build_mask
    five = plan_block_sparse(list(build_mask("qk_sparse", 1024, seed=0).slices), 1024, 1024,
                             gb.BLOCK_M, gb.BLOCK_N)
    assert five.row_lo.shape[1] == 5
    with tool.CompileRecorder() as rec:
        gb.launch_bwd(do, q, k, v, q, torch.zeros(1024, 8), five, head_dim ** -0.5, head_chunks=1)
    spills[5] = tool.resources(dict(rec.compiled)["_bwd_kernel"])["spill_stores"]
    assert spills[5] <= (64 if head_dim == 128 else 16), spills
    # the same plan's partial tiles from bitmaps (session 41: 108 bytes at d128, as without the
    # masking code itself: the extra arguments and buffers, not the per-cell work)
    from magi_attention.kernels.block_sparse import slice_bounds_array, union_row_intervals
    bits = gb.key_tile_bits(five, union_row_intervals(
        slice_bounds_array(list(build_mask("qk_sparse", 1024, seed=0).slices)), 1024))
    with tool.CompileRecorder() as rec:
        gb.launch_bwd(do, q, k, v, q, torch.zeros(1024, 8), five, head_dim ** -0.5, head_chunks=1,
                      bits=bits)
    with_bits = dict(rec.compiled)["_bwd_kernel"]
    spills["bits"] = tool.resources(with_bits)["spill_stores"]
    assert spills["bits"] <= (112 if head_dim == 128 else 16), spills
    assert with_bits.asm["ptx"].count("cp.async.bulk.tensor.1d") >= 2 + gb.WORDS
    built = {row_tma: kernel for (row_tma, chunks), kernel in built.items() if chunks == 1}
    assert built[True].asm["ptx"].count("cp.async.bulk.tensor.1d") >= 4  # + the row bounds
    kernel = built[False]
    res = tool.resources(kernel)
    assert res["num_warps"] == 12 and res["programs_per_sm"] == 1
    ptx = kernel.asm["ptx"]
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{gf.CONSUMER_REGS}" in ptx
    assert "cp.reduce.async.bulk.tensor" in ptx
    assert ptx.count("cp.async.bulk.tensor.1d") >= 2  # lse2 and delta ride with Q and dO
    sass = _sass(kernel)
    mmas, waits = sass.count("HGMMA."), sass.count("WARPGROUP.DEPBAR")
    assert mmas >= 40 and waits < mmas // 2, f"{waits} wgmma waits for {mmas} wgmmas"


def test_the_head_dim_256_configs_compile_for_sm90_within_an_sms_shared_memory(tool):
    """configs.FWD_WIDE / BWD_WIDE as they compile for sm90 at head_dim 256 (forward, and the
    ordered backward's three kernels): under 227 KB of shared memory, no forward spill; the
    backward's 64-row tiles at 8 warps spill under 1 KB (732 bytes) and ran 1.3x the no-spill
    32-row tiles on an H100 (session 39), so spills there are bounded, not banned."""
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.configs import bwd_config, fwd_config
    from magi_attention.kernels.triton.forward import launch_fwd
    fc, bc = fwd_config(256), bwd_config(256)
    slices = [AttnSlice.make(0, 300, 0, 300, 1)]
    plan = lambda m, n: plan_block_sparse(slices, 300, 300, m, n)  # noqa: E731
    q, k, v, do = tool._inputs(300, hq=4, hk=1, d=256)
    with tool.CompileRecorder() as rec:
        launch_fwd(q, k, v, plan(fc.block_m, fc.block_n), fc, 256 ** -0.5, 0.0, False)
        launch_bwd(do, q, k, v, q, torch.zeros(300, 4), plan(bc.block_m1, bc.block_n1),
                   plan(bc.block_m2, bc.block_n2), bc, 256 ** -0.5, 0.0, deterministic=True)
    res = {name: tool.resources(kernel) for name, kernel in rec.compiled}
    assert set(res) == {"_fwd_kernel", "_preprocess_kernel", "_dkdv_kernel", "_dq_kernel"}
    assert all(r["shared_kb"] <= 227 for r in res.values()), res
    assert res["_fwd_kernel"]["spill_stores"] == 0, res
    assert max(r["spill_stores"] for r in res.values()) <= 1024, res
