"""The CP sweep end to end from the Hydra command line: torchrun, 2 gloo processes on CPU.

One sweep (2 per-GPU seqlens x cp 1, 2, 4 x 2 masks x 9 strategies) runs once per module:
MagiAttention and three baselines, plus strategies defined below through ``cp.<label>.target``
that fail on purpose: an exception on every rank (error), on rank 1 only before any collective
(error, message gathered from rank 1), an out-of-memory error (oom), a wrong output (wrong, at
both seqlens: the gate at the first condemns the second), wrong gradients behind a right output
(bwd wrong, fwd timed; the gate samples rows at cp 2). Checks the rows, the figures, the
TFLOPs/s arithmetic, and that a rerun skips the final cells and re-measures only the others.
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from _cli import python_m, torchrun

from bench.config import DataConfig, GateConfig
from bench.cp.ring_p2p import RingP2P
from bench.cp.runner import NEEDS_RANKS, CPBenchConfig, StrategyChoice
from bench.metrics import attn_flops

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TIMEOUT_S = 240


# -- strategies that fail on purpose (imported by the torchrun ranks via PYTHONPATH) ----------
class RaisesEverywhere(RingP2P):
    def attention(self, q, k, v):
        raise RuntimeError("injected failure on every rank")


class RaisesOnRank1(RingP2P):
    """Fails in ``shard`` (local, no collective) on group rank 1 only."""

    def shard(self, x_global):
        if self.cp_rank == 1:
            raise RuntimeError("injected failure on rank 1")
        return super().shard(x_global)


class RunsOutOfMemory(RingP2P):
    def attention(self, q, k, v):
        raise torch.cuda.OutOfMemoryError("injected: CUDA out of memory")


class WrongOutput(RingP2P):
    def attention(self, q, k, v):
        return super().attention(q, k, v) * 1.5


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * 1.01


class WrongGradients(RingP2P):
    """The right output; dq, dk, dv 1% off (through the incoming gradient)."""

    def attention(self, q, k, v):
        return _ScaleGrad.apply(super().attention(q, k, v))


class _FailOnZeroRows(torch.autograd.Function):
    """Identity whose backward raises once a call after the first (the gate's, where dout may be
    zero off the gate's rows) gets a gradient with an all-zero row: a timed backward must see
    the whole dout, whose values set a GPU's clocks."""

    @staticmethod
    def forward(ctx, x, calls):
        ctx.calls = calls
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.calls.append(1)
        if len(ctx.calls) > 1 and (grad.flatten(1) == 0).all(dim=1).any():
            raise RuntimeError("timed backward with dout zero off the gate's rows")
        return grad, None


class TimedOnWholeDout(RingP2P):
    def attention(self, q, k, v):
        self._calls = getattr(self, "_calls", [])
        return _FailOnZeroRows.apply(super().attention(q, k, v), self._calls)


class _RecordsCalls(RingP2P):
    """ring_p2p that appends its letter to the file named by CP_TEST_CALLS on each call of
    group rank 0 (the order in which the runner called the strategies)."""

    letter = ""

    def attention(self, q, k, v):
        if self.cp_rank == 0:
            with open(os.environ["CP_TEST_CALLS"], "a") as f:
                f.write(self.letter)
        return super().attention(q, k, v)


class RecordsA(_RecordsCalls):
    letter = "a"


class RecordsB(_RecordsCalls):
    letter = "b"


class Sleeps(RingP2P):
    """ring_p2p whose every forward takes at least 0.1 s: rounds long enough to run out of a
    time limit of a few seconds."""

    def attention(self, q, k, v):
        time.sleep(0.1)
        return super().attention(q, k, v)


INJECTED = {"raises": "RaisesEverywhere", "raises_rank1": "RaisesOnRank1",
            "oom": "RunsOutOfMemory", "wrong": "WrongOutput", "wrong_grads": "WrongGradients",
            "whole_dout": "TimedOnWholeDout"}
REAL = ("magi", "ulysses", "ring_p2p", "hybrid_cp")
MASKS = ("causal", "causal_document")
SEQLEN_PER_GPU = (64, 128)
CP_SIZES = (1, 2, 4)


def _command(tmp: Path) -> list[str]:
    overrides = [
        "hardware=cpu", "hardware.head_dim=16", "hardware.warmup=0", "hardware.repeat=2",
        # warm-up by time: each rank sizes its own extra calls, which must agree (collectives)
        "hardware.warmup_ms=3",
        f"cp=[{','.join(REAL)}]", f"mask=[{','.join(MASKS)}]",
        f"seqlen_per_gpu=[{','.join(map(str, SEQLEN_PER_GPU))}]",
        f"cp_sizes=[{','.join(map(str, CP_SIZES))}]",
        f"out_dir={tmp}/results", f"plots_dir={tmp}/plots", "progress=false",
        f"hydra.run.dir={tmp}/hydra",
        # the gate samples 32 rows above S = 64: cp 1 checks every row, cp 2 sampled rows
        "gate.full_max_seqlen=64", "gate.rows=32",
    ]
    # the failing strategies come from an experiment file in a search-path folder
    conf = tmp / "conf" / "experiment"
    conf.mkdir(parents=True, exist_ok=True)
    lines = ["# @package _global_", "experiment_name: injected", "cp:"]
    for label, cls in INJECTED.items():
        lines += [f"  {label}:", "    name: ring_p2p", f"    target: test_runner:{cls}"]
    # MagiAttention with two overlapped stages: its rows report the hidden communication
    lines += ["  magi_staged:", "    name: magi", "    knobs:", "      num_stages: 2"]
    (conf / "cp_test_injected.yaml").write_text("\n".join(lines) + "\n")
    overrides += [f"hydra.searchpath=[file://{tmp}/conf]", "experiment=cp_test_injected"]
    return [*torchrun(2, "bench.cp"), *overrides]


def _run_killable(cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run in its own session; on timeout kill the whole group (torchrun and its ranks)."""
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as p:
        try:
            out, err = p.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            pytest.fail(f"timed out after {TIMEOUT_S} s (a rank stuck in a collective?):\n"
                        f"{out[-2000:]}\n{err[-4000:]}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _run(tmp: Path, command: list[str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", CP_TEST_CALLS=str(tmp / "calls.txt"),
               # this module (the strategies above) and what it imports (tests/_cli.py)
               PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parents[1]), str(ROOT),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = _run_killable(command or _command(tmp), env)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _rows(tmp: Path) -> pd.DataFrame:
    files = list((tmp / "results" / "cp").glob("*.csv"))
    assert len(files) == 1, files
    return pd.read_csv(files[0], keep_default_na=True).fillna({"message": ""})


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cp_sweep")
    first = _run(tmp)
    rows_first = _rows(tmp)
    second = _run(tmp)
    return tmp, rows_first, _rows(tmp).iloc[len(rows_first):], first, second


def _cell(rows, kernel, mask="causal", per_gpu=64, cp=2, direction="fwd"):
    sel = rows[(rows.kernel == kernel) & (rows["mask"] == mask) & (rows.cp_size == cp)
               & (rows.seqlen == per_gpu * cp) & (rows.direction == direction)]
    assert len(sel) == 1, f"{kernel} {mask} {per_gpu}x{cp} {direction}: {len(sel)} rows"
    return sel.iloc[0]


def test_every_cell_has_one_row(sweep):
    _, rows, *_ = sweep
    strategies = len(REAL) + len(INJECTED) + 1  # + magi_staged
    expected = len(SEQLEN_PER_GPU) * len(CP_SIZES) * len(MASKS) * strategies * 2
    assert len(rows) == expected
    keys = ["kernel", "mask", "seqlen", "cp_size", "direction"]
    assert not rows.duplicated(keys).any()


@pytest.mark.parametrize("kernel", REAL)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("cp", [1, 2])
def test_real_strategies_measured_and_gated(sweep, kernel, mask, cp):
    _, rows, *_ = sweep
    for per_gpu in SEQLEN_PER_GPU:
        for direction in ("fwd", "bwd"):
            row = _cell(rows, kernel, mask, per_gpu, cp, direction)
            assert row.status == "ok", row.message
            assert row.runtime_ms > 0 and row.build_ms > 0  # the build timed apart
            # TFLOPs/s/GPU from the mask's exact area, the runtime and cp_size
            flops = attn_flops(row.mask_area, 4, 16, 1, direction)
            assert row.flops == pytest.approx(flops)
            assert row.tflops_per_s == pytest.approx(flops / (row.runtime_ms * 1e-3) / 1e12 / cp)
            assert f"comm_bytes_per_rank={0 if cp == 1 else ''}" in row.message
    # the gate ran at the first per-GPU seqlen, with gradients (S <= full_max_seqlen)
    gated = _cell(rows, kernel, mask, SEQLEN_PER_GPU[0], cp, "bwd")
    assert "gate: out rel_err" in gated.message and "grads rel_err" in gated.message


def test_staged_magi_reports_the_communication_its_overlap_hides(sweep):
    """Timed again with overlap off: hidden_comm_ms = serial - overlapped (>= 0) on cp 2 rows;
    cp 1 has no remote stage, so nothing to hide and no field."""
    _, rows, *_ = sweep
    for direction in ("fwd", "bwd"):
        staged = _cell(rows, "magi_staged", "causal", 64, 2, direction)
        assert staged.status == "ok", staged.message
        assert "num_stages=2" in staged.message and "fused=False" in staged.message
        assert "dispatch=min_heap" in staged.message  # "auto" on the CPU kernel
        hidden = float(staged.message.split("hidden_comm_ms=")[1].split(";")[0])
        assert hidden >= 0
        assert "hidden_comm_ms" not in _cell(rows, "magi_staged", "causal", 64, 1,
                                             direction).message


def test_comm_bytes_of_a_ring_step(sweep):
    """ring_p2p at cp 2, full KV block sent once per forward: 2 * S/2 * Hkv * D * 4 bytes (per
    call, though the warm-up by time made more calls than warmup + repeat)."""
    _, rows, *_ = sweep
    row = _cell(rows, "ring_p2p", "causal", 64, 2, "fwd")
    assert f"comm_bytes_per_rank={2 * 64 * 2 * 16 * 4}" in row.message
    assert "warmup_ms=3" in row.env.split(";")


def test_cp_sizes_beyond_the_launch_are_unsupported_with_reason(sweep):
    _, rows, *_ = sweep
    big = rows[rows.cp_size == 4]
    assert len(big) and (big.status == "unsupported").all()
    assert big.message.str.startswith(NEEDS_RANKS).all()
    assert (big.message.str.contains("WORLD_SIZE=2")).all()


@pytest.mark.parametrize("label,cp,status,text", [
    pytest.param("raises", 1, "error", "injected failure on every rank", id="raises-cp1"),
    pytest.param("raises", 2, "error", "injected failure on every rank", id="raises-cp2"),
    pytest.param("raises_rank1", 1, "ok", "", id="raises_rank1-cp1-not-a-member"),
    pytest.param("raises_rank1", 2, "error", "injected failure on rank 1", id="raises_rank1-cp2"),
    pytest.param("oom", 2, "oom", "out of memory", id="oom"),
    pytest.param("wrong", 2, "wrong", "gate: out rel_err", id="wrong"),
    pytest.param("wrong_grads", 1, "wrong", "gate: d", id="wrong_grads-cp1-all-rows"),
    pytest.param("wrong_grads", 2, "wrong", "gate: d", id="wrong_grads-cp2-sampled-rows"),
])
def test_injected_failures_become_rows_and_the_sweep_goes_on(sweep, label, cp, status, text):
    _, rows, *_ = sweep
    for per_gpu in SEQLEN_PER_GPU:
        for direction in ("fwd", "bwd"):
            row = _cell(rows, label, "causal_document", per_gpu, cp, direction)
            if label == "wrong_grads" and direction == "fwd":  # a right forward is timed
                assert row.status == "ok" and row.runtime_ms > 0, row.message
                continue
            assert row.status == status, row.message
            assert text in row.message
            if status != "ok":
                assert pd.isna(row.runtime_ms)
    # cells after the failures were measured: the last real strategy at the last cell
    assert _cell(rows, REAL[-1], MASKS[-1], SEQLEN_PER_GPU[-1], 2, "bwd").status == "ok"


def test_figures_written(sweep):
    tmp, *_ = sweep
    for mask in MASKS:
        for direction in ("fwd", "bwd"):
            for per_gpu in SEQLEN_PER_GPU:
                png = tmp / "plots" / "cp" / mask / direction / f"flops_report_{per_gpu}_per_gpu.png"
                assert png.stat().st_size > 10_000, png


def test_ratio_table_divides_magi_by_each_baseline(sweep):
    from bench.cp.plot import ratio_table
    tmp, rows, *_ = sweep
    table = ratio_table(tmp / "results" / "cp")
    # raises_rank1 is ok at cp 1 (rank 1 is not a member); wrong_grads has ok fwd rows;
    # magi_staged, a labelled variant of magi, is compared like any other strategy, and so is
    # whole_dout (ring_p2p with a check in its backward)
    ok_baselines = set(REAL[1:]) | {"raises_rank1", "wrong_grads", "magi_staged", "whole_dout"}
    assert set(table.baseline) == ok_baselines
    got = table[(table.baseline == "ulysses") & (table["mask"] == "causal") & (table.cp_size == 2)
                & (table.seqlen_per_gpu == 64) & (table.direction == "bwd")].ratio
    magi = _cell(rows, "magi", "causal", 64, 2, "bwd").tflops_per_s
    ulysses = _cell(rows, "ulysses", "causal", 64, 2, "bwd").tflops_per_s
    assert got.item() == pytest.approx(magi / ulysses)
    assert (tmp / "plots" / "cp" / "ratios_magi.md").read_text().count("| causal | 2 |") == 4


def test_rerun_skips_final_cells(sweep):
    """The second launch re-measures only error cells and the cp sizes that needed more ranks."""
    _, first, rerun, _, second = sweep
    keys = ["kernel", "mask", "seqlen", "cp_size", "direction"]
    redo = first[(first.status == "error") | first.message.str.startswith(NEEDS_RANKS)]
    assert len(rerun) == len(redo) > 0
    assert set(map(tuple, rerun[keys].values)) == set(map(tuple, redo[keys].values))
    assert f"wrote {len(redo)} rows" in second.stdout


@pytest.mark.parametrize("kwargs,match", [
    pytest.param(dict(label="x", name="nope"), "unknown strategy name 'nope'", id="name"),
    pytest.param(dict(label="x", name="magi", target="no_colon"), "pkg.module:Class", id="target"),
])
def test_strategy_choice_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StrategyChoice(**kwargs)


@functools.cache
def _hardware():
    from bench.config import resolve_hardware
    from omegaconf import OmegaConf
    from bench.config import CONFIGS_DIR
    values = OmegaConf.to_container(OmegaConf.load(CONFIGS_DIR / "hardware" / "cpu.yaml"))
    values.pop("defaults")
    return resolve_hardware(values)


@pytest.mark.parametrize("field,value,match", [
    pytest.param("cp_sizes", (2, 2), "distinct positive", id="cp_sizes"),
    pytest.param("seqlen_per_gpu", (0,), "positive", id="seqlen_per_gpu"),
    pytest.param("directions", ("fwd", "both"), "'fwd' and/or 'bwd'", id="directions"),
    pytest.param("time_limit_s", 0, "time_limit_s must be > 0", id="time_limit_s"),
])
def test_config_validates(field, value, match):
    from bench.config import MaskChoice
    args = dict(hardware=_hardware(), strategies=(StrategyChoice("magi", "magi"),),
                masks=(MaskChoice("causal", "causal"),), seqlen_per_gpu=(64,),
                data=DataConfig(), gate=GateConfig())
    args[field] = value
    with pytest.raises(ValueError, match=match):
        CPBenchConfig(**args)


def test_rounds_default_to_one_and_must_be_positive():
    import dataclasses
    assert _hardware().rounds == 1
    with pytest.raises(ValueError, match="hardware.rounds must be >= 1"):
        dataclasses.replace(_hardware(), rounds=0)


def test_world_of_one_without_torchrun(tmp_path):
    """``python -m bench.cp`` alone: a world of one; cp 2 is 'unsupported, needs 2 ranks'."""
    cmd = [*python_m("bench.cp"), "hardware=cpu", "hardware.head_dim=16",
           "hardware.warmup=0", "hardware.repeat=1", "cp=[magi]", "mask=[causal]",
           "seqlen_per_gpu=[64]", "cp_sizes=[1,2]", f"out_dir={tmp_path}/results",
           f"plots_dir={tmp_path}/plots", "progress=false", f"hydra.run.dir={tmp_path}/hydra"]
    proc = _run_killable(cmd, dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = _rows(tmp_path)
    assert list(rows.status) == ["ok", "ok", "unsupported", "unsupported"]
    assert rows.message.iloc[-1].startswith(NEEDS_RANKS)


@pytest.mark.parametrize("error, status", [
    (ModuleNotFoundError("No module named 'yunchang'"), "missing"),
    (NotImplementedError("per-head masks"), "unsupported")], ids=["absent-package", "real-limit"])
def test_phase_failure_status(error, status):
    """The status a CP phase reports (then agreed over ranks) for an absent package and a limit."""
    from bench.cp.runner import _run_phase

    def phase():
        raise error
    assert _run_phase(True, phase).status == status


def test_the_backward_is_timed_on_the_whole_dout(sweep):
    """The gate's dout is zero off its rows at cp 2 (S = 128 > full_max_seqlen): the timed
    calls must get the whole one (TimedOnWholeDout raises otherwise)."""
    _, rows, *_ = sweep
    spy = rows[rows.kernel == "whole_dout"]
    assert len(spy) == len(SEQLEN_PER_GPU) * len(CP_SIZES) * len(MASKS) * 2
    measured = spy[spy.cp_size <= 2]
    assert (measured.status == "ok").all(), measured[["mask", "seqlen", "cp_size", "direction",
                                                      "status", "message"]]


# -- interleaved timing (hardware.rounds) -------------------------------------------------------
ROUNDS_STRATEGIES = {"order_a": "RecordsA", "order_b": "RecordsB", "raises": "RaisesEverywhere",
                     "wrong": "WrongOutput", "oom": "RunsOutOfMemory"}


def _rounds_command(tmp: Path, rounds: int, strategies: dict[str, str] = ROUNDS_STRATEGIES,
                    extra: tuple[str, ...] = ()) -> list[str]:
    conf = tmp / "conf" / "experiment"
    conf.mkdir(parents=True, exist_ok=True)
    lines = ["# @package _global_", "experiment_name: rounds", "cp:"]
    for label, cls in strategies.items():
        lines += [f"  {label}:", "    name: ring_p2p", f"    target: test_runner:{cls}"]
    (conf / "cp_test_rounds.yaml").write_text("\n".join(lines) + "\n")
    overrides = [
        "hardware=cpu", "hardware.head_dim=16", "hardware.warmup=0", "hardware.repeat=2",
        f"hardware.rounds={rounds}", "mask=[causal]", "seqlen_per_gpu=[64]", "cp_sizes=[2]",
        f"out_dir={tmp}/results", f"plots_dir={tmp}/plots", "progress=false", "report=false",
        f"hydra.run.dir={tmp}/hydra", f"hydra.searchpath=[file://{tmp}/conf]",
        "experiment=cp_test_rounds", "cp=[magi]", *extra,
    ]
    return [*torchrun(2, "bench.cp"), *overrides]


@pytest.mark.parametrize("rounds,order", [(1, "ab"), (3, "abababab")])
def test_rounds_time_every_strategy_in_turn(tmp_path, rounds, order):
    """rounds 1: each strategy built, gated and timed before the next (a, then b); rounds 3:
    both built and gated first, then timed in turn three times (a b a b a b after the gates).
    Failures keep their rows, and the real strategy beside them is measured."""
    _run(tmp_path, _rounds_command(tmp_path, rounds))
    calls = (tmp_path / "calls.txt").read_text()
    runs = "".join(c for i, c in enumerate(calls) if i == 0 or c != calls[i - 1])
    assert runs == order, calls
    rows = _rows(tmp_path)
    assert len(rows) == (len(ROUNDS_STRATEGIES) + 1) * 2
    for label, status in [("order_a", "ok"), ("order_b", "ok"), ("magi", "ok"),
                          ("raises", "error"), ("wrong", "wrong"), ("oom", "oom")]:
        for direction in ("fwd", "bwd"):
            row = _cell(rows, label, direction=direction)
            assert row.status == status, row.message
            assert (row.runtime_ms > 0) if status == "ok" else pd.isna(row.runtime_ms)
    assert (f"rounds={rounds}" in rows.env.iloc[0].split(";")) == (rounds > 1)
    # an oom says where the interleaving kept the other strategies allocated
    assert ("stayed allocated" in _cell(rows, "oom").message) == (rounds > 1)


def test_time_limit_keeps_the_rounds_done_and_starts_no_point_it_cannot_finish(tmp_path):
    """hardware.rounds 50 of a strategy whose rounds take >= 0.3 s, time_limit_s 4: the first
    point's rounds stop short of the limit and its rows keep the rounds done (the same count for
    every strategy and direction); the second point (its build and first round as long as the
    first's) is not started, and the run ends normally, saying so."""
    command = _rounds_command(tmp_path, 50, {"sleeps": "Sleeps"},
                              ("time_limit_s=4", "mask=[causal,full]"))
    proc = _run(tmp_path, command)
    rows = _rows(tmp_path)
    assert set(rows["mask"]) == {"causal"}, rows[["kernel", "mask", "direction"]]
    assert len(rows) == 4 and (rows.status == "ok").all(), rows.message.tolist()
    done = {int(m.split("rounds_done=")[1].split()[0]) for m in rows.message}
    assert len(done) == 1 and 1 <= done.pop() < 50, rows.message.tolist()
    assert "1 (seqlen, cp_size, mask) points not started" in proc.stderr + proc.stdout
