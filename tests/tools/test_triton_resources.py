"""tools/triton_resources.py: the library's Triton and Gluon kernels compiled for sm90 on a
machine without a GPU, and what ptxas reports of them. The properties the configs rely on: a
config's register cap reaches ptxas, the forward's two configs fit two programs per SM without
spills, the Gluon kernels split 12 warps' registers with setmaxnreg, hand the tensor cores over
on named barriers and keep their MMAs asynchronous."""
import re

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from magi_attention.kernels.triton.configs import (BwdConfig, FwdConfig,  # noqa: E402
                                                   launch_options)


def test_launch_options_pass_the_register_cap_only_when_set():
    assert launch_options(FwdConfig(128, 64, 4, 3)) == {"num_warps": 4, "num_stages": 3}
    assert launch_options(BwdConfig(64, 64, 64, 64, 8, 2, max_registers=128)) == {
        "num_warps": 8, "num_stages": 2, "maxnreg": 128}


@pytest.fixture(scope="module")
def tool(load_script):
    if torch.cuda.is_available():
        pytest.skip("the compile-only driver is for machines without a GPU")
    return load_script("tools/triton_resources.py")


def _triton_fwd(tool, config):
    """Resources of the Triton forward compiled at ``config`` (a causal 256-token plan)."""
    from magi_attention.kernels.triton.forward import launch_fwd
    q, k, v, _ = tool.inputs(256, 128, (4, 1))
    plan = tool.plan_block_sparse(tool.named_mask("causal", 256), 256, 256, config.block_m,
                                  config.block_n)
    driver = triton.runtime.driver._active
    with tool.CompileRecorder() as rec:
        launch_fwd(q, k, v, plan, config, 128 ** -0.5, 0.0, False)
    assert triton.runtime.driver._active is driver  # the driver is restored
    (name, kernel), = rec.compiled
    assert name == "_fwd_kernel"
    return tool.resources(kernel)


def test_a_forward_config_register_cap_reaches_ptxas(tool):
    free = _triton_fwd(tool, FwdConfig(128, 64, 8, 3, 2))
    capped = _triton_fwd(tool, FwdConfig(128, 64, 8, 3, 2, max_registers=96))
    assert 0 < free["registers"] <= 255 and free["num_warps"] == 8 and free["shared_kb"] > 0
    assert capped["registers"] <= 96 < free["registers"]


def test_the_forward_configs_fit_two_programs_per_sm_without_spills(tool):
    """configs.fwd_config as it compiles for sm90: the short-row config at 8 warps and 128
    registers must not spill and must keep two programs per SM (what its measured gain on
    documents rests on); the default (4 warps, no cap: it spills a few hundred bytes, and ran
    faster than the capped config on long rows) keeps two as well, on the same plan's tiles."""
    from magi_attention.kernels.triton.configs import SHORT_ROW_TILES, fwd_config
    default, short = fwd_config(128), fwd_config(128, SHORT_ROW_TILES - 1)
    assert (short.block_m, short.block_n) == (default.block_m, default.block_n)  # one plan
    res = _triton_fwd(tool, short)
    assert res["num_warps"] == 8 and res["registers"] <= 128
    assert res["spill_stores"] == 0 and res["programs_per_sm"] == 2
    assert _triton_fwd(tool, default)["programs_per_sm"] == 2


@pytest.fixture(scope="module")
def gluon_fwd(tool):
    """The Gluon forward of the short-rows configuration at head_dim 128: (kernel, SASS)."""
    pytest.importorskip("triton.experimental.gluon")
    (name, kernel), = tool.compile_config("gluon_fwd_d128_short_rows")
    assert name == "_fwd_kernel"
    return kernel, tool.sass(kernel)


def test_the_gluon_forward_splits_registers_without_spills(tool, gluon_fwd):
    """12 warps (two consumer warpgroups and the producer's), no spills, the K/V ring in shared
    memory, and setmaxnreg moving registers from the producer to the consumers."""
    from magi_attention.kernels.triton import gluon_forward as gf
    kernel, _ = gluon_fwd
    res = tool.resources(kernel)
    assert res["num_warps"] == 12 and res["registers"] == gf.MAXNREG
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0
    ring = 2 * gf.NUM_BUF * gf.BLOCK_N * 128 * 2 + gf.BLOCK_M * 128 * 2
    assert ring / 1024 <= res["shared_kb"] <= 227
    ptx = kernel.asm["ptx"]
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{gf.CONSUMER_REGS}" in ptx
    assert f"setmaxnreg.dec.sync.aligned.u32 \t{gf.PRODUCER_REGS}" in ptx


def test_the_gluon_forward_hands_turns_over_on_named_barriers(gluon_fwd):
    """The consumers' ping-pong: bar.sync / bar.arrive of 256 threads on TURN_BARRIER and
    TURN_BARRIER + 1, in the SASS."""
    from magi_attention.kernels.triton import gluon_forward as gf
    _, code = gluon_fwd
    for bar in (gf.TURN_BARRIER, gf.TURN_BARRIER + 1):
        assert f"BAR.SYNC.DEFER_BLOCKING {bar:#x}, 0x100 ;" in code
        assert f"BAR.ARV {bar:#x}, 0x100 ;" in code


def test_the_gluon_forward_keeps_partial_tile_loads_off_the_s_wait(gluon_fwd):
    """Short rows (this causal plan: the plain PV wait): a partial tile's key tile and the
    rows' interval are loaded before the wait for S_j, so no global load sits between that wait
    (DEPBAR 1) and the softmax's first exp2 in either consumer's loop."""
    _, code = gluon_fwd
    loads = [span.count("LDG") for span in re.findall(r"DEPBAR\.LE gsb0, 0x1 ;(.*?)MUFU\.EX2",
                                                      code, re.S)]
    assert len(loads) >= 2 and max(loads) == 0, loads


def test_the_gluon_backward_keeps_its_mmas_asynchronous(tool):
    """The Gluon backward at head_dim 128 (causal, partial tiles from the row table): 12 warps,
    the setmaxnreg split, dQ by TMA reduce-adds, lse2 and delta by TMA with Q and dO, a few
    spilled scalars at most (the consumers hold dK, dV, S and dP in 240 registers), and its
    wgmmas asynchronous: ptxas serialises every wgmma (a wait after each) when an MMA may still
    be in flight across the loop's back edge, so the SASS's waits are counted."""
    pytest.importorskip("triton.experimental.gluon")
    from magi_attention.kernels.triton import gluon_forward as gf
    compiled = dict(tool.compile_config("gluon_bwd_d128_table"))
    kernel = compiled["_bwd_kernel"]
    res = tool.resources(kernel)
    assert res["num_warps"] == 12 and res["programs_per_sm"] == 1
    assert res["spill_stores"] <= 64, res
    ptx = kernel.asm["ptx"]
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{gf.CONSUMER_REGS}" in ptx
    assert "cp.reduce.async.bulk.tensor" in ptx
    assert ptx.count("cp.async.bulk.tensor.1d") >= 2
    code = tool.sass(kernel)
    mmas, waits = code.count("HGMMA."), code.count("WARPGROUP.DEPBAR")
    assert mmas >= 40 and waits < mmas // 2, f"{waits} wgmma waits for {mmas} wgmmas"


def test_the_cli_writes_a_row_per_kernel(tool, tmp_path, capsys):
    """main: a configuration's kernels as CSV rows and as PTX files (the compiled kernels are
    the ones the tests above built: Triton's cache answers)."""
    import csv
    out, ptx = tmp_path / "res.csv", tmp_path / "ptx"
    tool.main(["--only", "triton_fwd_d128_short_rows", "--out", str(out), "--ptx-dir", str(ptx)])
    rows = list(csv.DictReader(out.open()))
    assert [r["kernel"] for r in rows] == ["_fwd_kernel"]
    assert rows[0]["config"] == "triton_fwd_d128_short_rows" and rows[0]["error"] == ""
    assert int(rows[0]["programs_per_sm"]) == 2 and rows[0]["triton_version"]
    assert [p.name for p in ptx.iterdir()] == ["triton_fwd_d128_short_rows__0__fwd_kernel.ptx"]
    assert "_fwd_kernel" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="matches no configuration"):
        tool.main(["--only", "no_such_config"])
