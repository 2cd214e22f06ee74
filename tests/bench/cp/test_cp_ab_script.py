"""scripts/dev/cp_ab.py under torchrun with gloo: per mask, every strategy timed in every round
(both directions), one row each, written once, and a summary on rank 0."""
import collections
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_rounds_interleave_every_strategy_and_direction(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "scripts" / "dev" / "cp_ab.py"), "--out", str(tmp_path), "--rounds", "3",
           "--", "hardware=cpu", "hardware.head_dim=16", "hardware.warmup=1",
           "hardware.repeat=1", "hardware.warmup_ms=2", "cp=[magi,ring_p2p]", "mask=[causal,full]",
           "seqlen_per_gpu=[64]", "cp_sizes=[2]"]
    proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with (tmp_path / "cp_ab.csv").open() as f:
        rows = list(csv.DictReader(f))
    order = [(r["mask"], r["strategy"], r["direction"], int(r["round"])) for r in rows]
    assert order == [(m, s, d, i) for m in ("causal", "full") for i in range(3)
                     for s in ("magi", "ring_p2p") for d in ("fwd", "bwd")]
    assert all(float(r["ms"]) > 0 for r in rows)
    summary = [line for line in proc.stdout.splitlines() if "over 3 rounds" in line]
    assert len(summary) == 8  # printed once, by rank 0
    assert summary[0].startswith("causal bwd magi") and summary[-1].startswith("full fwd ring_p2p")
    for rank in (0, 1):  # each rank's collections inside its timing blocks: in every block
        with (tmp_path / f"cp_ab_gc_rank{rank}.csv").open() as f:  # at least time_cuda_ms's
            gc_rows = list(csv.DictReader(f))  # own, a full one
        full = {(r["mask"], r["strategy"], r["direction"], int(r["round"])) for r in gc_rows
                if r["generation"] == "2"}
        assert full == set(order)


def _dev(name: str):
    """A module of scripts/dev (imported as the scripts import each other: by folder)."""
    import importlib
    sys.path.insert(0, str(ROOT / "scripts" / "dev"))
    return importlib.import_module(name)


def _cp_ab():
    return _dev("cp_ab")


def _probes():
    return _dev("block_probes")


class _Config:
    directions = ("fwd", "bwd")

    class hardware:
        warmup, repeat, warmup_ms = 1, 1, 0.0


def _rounds(monkeypatch, timing, labels, **kwargs) -> dict:
    """cp_ab.timed_rounds over ``labels`` (no-op calls), 2 rounds, one causal mask, with
    ``timing`` standing in for time_cuda_ms and no process group; ``kwargs``: BlockSettings."""
    from bench.config import MaskChoice
    cp_ab = _cp_ab()
    monkeypatch.setattr(cp_ab, "time_cuda_ms", timing)
    monkeypatch.setattr(cp_ab, "group_max", lambda ms, group, device: ms)
    choice = MaskChoice(label="causal", name="causal", params={})
    calls = [{"fwd": lambda: None, "bwd": lambda: None}] * len(labels)
    return cp_ab.timed_rounds(_Config, choice, labels, calls, 2, lambda row: None, None, None,
                              settings=cp_ab.BlockSettings(**kwargs))


def test_keep_garbage_reaches_every_timing(monkeypatch):
    # --keep-garbage reproduces the timings before session 50 (no collection before each
    # strategy's timing); the default collects before every one
    cp_ab = _cp_ab()
    seen = []
    for collect in (True, False):
        seen.clear()
        args = cp_ab.parse_args([] if collect else ["--keep-garbage"], "probe")
        assert args.keep_garbage is not collect
        times = _rounds(monkeypatch, lambda fn, *a: (seen.append(a[-1]), fn(), 1.0)[-1],
                        ["a", "b"], collect=not args.keep_garbage)
        assert seen == [collect] * 8 and len(times) == 4


def test_collections_in_records_what_runs_in_the_block_and_can_keep_the_collector_off():
    import gc
    enabled_before = gc.isenabled()
    with _probes().collections_in([], disable=True) as events:
        inside = gc.isenabled()
        gc.collect(1)
    gc.collect(0)  # outside: not recorded
    assert inside is False and gc.isenabled() == enabled_before
    assert [gen for gen, _, _ in events] == [1] and events[0][1] >= 0


def test_gc_off_reaches_every_timing_and_collections_are_labelled(monkeypatch):
    import gc
    cp_ab = _cp_ab()
    states = []

    def timing(fn, *args):
        states.append(gc.isenabled())
        gc.collect(0)  # a collection inside the block
        return 1.0
    cp_ab.PROBES.clear()
    assert cp_ab.parse_args(["--gc-off"], "probe").gc_off
    _rounds(monkeypatch, timing, ["a", "b"], gc_off=True)
    assert states == [False] * 8 and gc.isenabled()
    assert [tuple(r[:5]) for r in cp_ab.PROBES.rows["gc"]] == [
        ("causal", s, d, r, 0) for r in range(2) for s in ("a", "b") for d in ("fwd", "bwd")]


class _Holder:
    """A reference cycle holding a tensor, as a timing block might leave behind."""

    def __init__(self):
        import torch
        self.me, self.tensor = self, torch.zeros(250_000)  # 1 MB


def test_the_census_counts_the_garbage_a_block_left_and_frees_it():
    import gc
    probes = _probes()
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        _Holder()
        objects, tensors, mb, types = probes.garbage_census()
        assert tensors == 1 and abs(mb - 1.0) < 1e-6 and "_Holder:1" in types and objects >= 2
        assert probes.garbage_census()[:3] == (0, 0, 0.0)  # freed, nothing kept by DEBUG_SAVEALL
    finally:
        if enabled:
            gc.enable()


def test_census_rows_name_every_block(monkeypatch):
    import gc
    cp_ab = _cp_ab()
    cp_ab.PROBES.clear()
    assert cp_ab.parse_args(["--census"], "probe").census
    enabled = gc.isenabled()
    gc.disable()  # only the census frees the blocks' garbage
    try:
        _rounds(monkeypatch, lambda fn, *args: (_Holder(), 1.0)[-1], ["a"], census=True)
    finally:
        if enabled:
            gc.enable()
    census = cp_ab.PROBES.rows["census"]
    assert [tuple(r[:4]) for r in census] == [
        ("causal", "a", d, r) for r in range(2) for d in ("fwd", "bwd")]
    assert all(r[5] == 1 for r in census)  # each block's one held tensor


def test_pause_sleeps_before_every_block(monkeypatch):
    """--pause-ms N: the host sleeps N ms before each timing block, outside the timing."""
    cp_ab = _cp_ab()
    events = []
    monkeypatch.setattr(cp_ab.time, "sleep", lambda s: events.append(("sleep", s)))
    assert cp_ab.parse_args(["--pause-ms", "100"], "probe").pause_ms == 100.0
    _rounds(monkeypatch, lambda fn, *a: (events.append(("time", None)), 1.0)[-1], ["a", "b"],
            pause_ms=100.0)
    assert events == [("sleep", 0.1), ("time", None)] * 8


def test_every_flag_of_the_command_line_reaches_the_timing(monkeypatch):
    """main's partial of _mask_rounds must bind (session 52: --sync-first's keyword was missing
    from _mask_rounds, and the launch failed on the GPU), and timed_rounds takes the same."""
    import inspect
    cp_ab = _cp_ab()
    captured = {}
    monkeypatch.setattr(cp_ab, "load_config", lambda overrides: None)
    monkeypatch.setattr(cp_ab, "run", lambda config, rounds, out, mask_rounds:
                        captured.update(partial=mask_rounds))  # None: no rows to summarise
    cp_ab.main(["--keep-garbage", "--gc-off", "--census", "--pause-ms", "5", "--sync-first",
                "--stage-events", "--per-call", "--clock", "both"])
    keywords = captured["partial"].keywords
    assert keywords == dict(settings=cp_ab.BlockSettings(collect=False, gc_off=True, census=True,
                                                         pause_ms=5.0, sync_first=True,
                                                         stage_events=True, per_call=True,
                                                         clock="both"))
    inspect.signature(cp_ab._mask_rounds).bind(*[None] * 7, **keywords)
    inspect.signature(cp_ab.timed_rounds).bind(*[None] * 8, **keywords)


def test_allocator_rows_hold_each_blocks_change_of_the_counters(monkeypatch):
    """On CUDA every block gets a row: the allocator counters' change over the block and the MB
    reserved after it (here a stand-in whose device allocations rise by 3 inside each block)."""
    cp_ab, probes = _cp_ab(), _probes()
    calls = [0]

    def counters():
        calls[0] += 1
        n = calls[0]
        return {**{k: 0 for k in probes.ALLOC_COUNTERS}, "num_device_alloc": 3 * (n // 2),
                "reserved": n * 2**20}
    monkeypatch.setattr(probes, "allocator_counters", counters)
    cp_ab.PROBES.clear()
    _rounds(monkeypatch, lambda fn, *a: 1.0, ["a"])
    rows = cp_ab.PROBES.rows["alloc"]
    assert len(rows) == 4  # 2 rounds x (fwd, bwd)
    header = probes.HEADERS["alloc"]
    for i, row in enumerate(rows):
        values = dict(zip(header, row))
        assert values["num_device_alloc"] == 3 and values["num_alloc_retries"] == 0
        assert values["reserved_mb"] == str(2 * (i + 1))


def test_allocator_counters_are_empty_off_cuda(monkeypatch):
    probes = _probes()
    monkeypatch.setattr(probes.torch.cuda, "is_available", lambda: False)
    assert probes.allocator_counters() == {}


def _three_calls_a_block(monkeypatch, cp_ab):
    """A stand-in timing that makes 3 calls a block (1 ms, no group); returns the mask."""
    def timing(fn, *args):
        for _ in range(3):
            fn()
        return 1.0
    monkeypatch.setattr(cp_ab, "time_cuda_ms", timing)
    monkeypatch.setattr(cp_ab, "group_max", lambda ms, group, device: ms)
    from bench.config import MaskChoice
    return MaskChoice(label="causal", name="causal", params={})


def test_host_rows_hold_each_blocks_wall_and_cpu_time_a_call(monkeypatch):
    """Every block gets a row of its calls' host time: here each call sleeps 2 ms (wall time,
    next to no CPU) and the stand-in timing makes 3 calls a block."""
    import time
    cp_ab = _cp_ab()
    choice = _three_calls_a_block(monkeypatch, cp_ab)
    calls = [{"fwd": lambda: time.sleep(0.002), "bwd": lambda: time.sleep(0.002)}]
    cp_ab.PROBES.clear()
    cp_ab.timed_rounds(_Config, choice, ["a"], calls, 2, lambda row: None, None, None)
    rows = cp_ab.PROBES.rows["host"]
    assert [tuple(r[:4]) for r in rows] == [
        ("causal", "a", d, i) for i in range(2) for d in ("fwd", "bwd")]
    for row in rows:
        values = dict(zip(_probes().HEADERS["host"], row))
        assert values["calls"] == 3
        wall, cpu = float(values["wall_ms_per_call"]), float(values["cpu_ms_per_call"])
        assert wall >= 2.0 and cpu < wall
        span = float(values["end_unix_s"]) - float(values["start_unix_s"])
        assert span > 0.005  # 3 calls x 2 ms, written to the ms
        assert values["rank_ms"] == "1.0000"  # the stand-in timing's, before the group's max


def test_per_call_rows_hold_every_calls_issue_time_and_its_host_cpu_and_gpu_ms(monkeypatch):
    """With per_call, every call of a block gets a row in order: here 3 calls a block, the second
    sleeping 6 ms and the others 2 ms (host clock marks off CUDA), so the rows show which call
    was slow and when each was issued; without it, no rows."""
    import time
    cp_ab, probes = _cp_ab(), _probes()
    monkeypatch.setattr(probes.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(probes, "mark", time.perf_counter)
    sleeps = iter([0.002, 0.006, 0.002] * 8)
    choice = _three_calls_a_block(monkeypatch, cp_ab)
    calls = [{d: lambda: time.sleep(next(sleeps)) for d in ("fwd", "bwd")}]
    for per_call, expected_rows in ((False, 0), (True, 6)):
        cp_ab.PROBES.clear()
        cp_ab.timed_rounds(_Config, choice, ["a"], calls, 1, lambda row: None, None, None,
                           settings=cp_ab.BlockSettings(per_call=per_call))
        rows = cp_ab.PROBES.rows["calls"]
        assert len(rows) == expected_rows
    header = probes.HEADERS["calls"]
    fwd = [dict(zip(header, r)) for r in rows if r[2] == "fwd"]
    assert [v["call"] for v in fwd] == [0, 1, 2] and fwd[0]["host_start_ms"] == "0.000"
    host, gpu = ([float(v[k]) for v in fwd] for k in ("host_ms", "gpu_ms"))
    assert 6.0 <= host[1] and max(host[0], host[2]) < 6.0
    assert all(float(v["cpu_ms"]) < 1.0 for v in fwd)  # asleep: wall, next to no CPU
    assert 6.0 <= gpu[1] and max(gpu[0], gpu[2]) < 6.0
    assert float(fwd[2]["host_start_ms"]) >= 8.0  # issued after the first two calls' 8 ms


def test_stage_events_mark_the_runtimes_kernels_waits_and_fills_and_put_them_back(monkeypatch):
    """StageEvents wraps DistAttnRuntime._fwd / _bwd / _fused_kv_start and WorkHandle.wait inside
    its block only: here a stand-in kernel call of 2 ms, a collective whose wait takes 3 ms and a
    buffer fill of 1 ms (host clock marks off CUDA), two calls of each, then the originals are
    back."""
    import time
    stage_events = _dev("stage_events")
    from magi_attention.comm import WorkHandle
    from magi_attention.functional import DistAttnRuntime
    monkeypatch.setattr(stage_events.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(DistAttnRuntime, "_fwd", lambda self: time.sleep(0.002))
    monkeypatch.setattr(DistAttnRuntime, "_fused_kv_start", lambda self: time.sleep(0.001))
    stand_in, fill, wait = DistAttnRuntime._fwd, DistAttnRuntime._fused_kv_start, WorkHandle.wait
    marks = stage_events.StageEvents()
    with marks.installed():
        for _ in range(2):
            DistAttnRuntime._fused_kv_start(None)
            DistAttnRuntime._fwd(None)
            WorkHandle(None, lambda: time.sleep(0.003), 0, "cast").wait()
    assert DistAttnRuntime._fwd is stand_in and WorkHandle.wait is wait
    assert DistAttnRuntime._fused_kv_start is fill
    kernels, kernel_ms, waits, wait_ms, fills, fill_ms = marks.row(calls=2)
    assert (kernels, waits, fills) == (2, 2, 2)
    assert 1.0 <= float(fill_ms) < 2.0 <= float(kernel_ms) < 3.0 <= float(wait_ms)
    DistAttnRuntime._fwd(None)  # after the block: not marked
    assert len(marks.kernels) == 2


def test_stage_rows_from_a_gloo_launch(tmp_path):
    """--stage-events through a real launch (gloo, magi and a baseline, one round): magi's
    blocks mark its kernel calls and the casts' waits, the baseline's none of the runtime's."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(ROOT / "scripts" / "dev" / "cp_ab.py"), "--stage-events", "--per-call", "--out",
           str(tmp_path),
           "--rounds", "1", "--", "hardware=cpu", "hardware.head_dim=16", "hardware.warmup=1",
           "hardware.repeat=1", "hardware.warmup_ms=0", "cp=[magi,ulysses]", "mask=[causal]",
           "seqlen_per_gpu=[64]", "cp_sizes=[2]"]
    proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for rank in (0, 1):
        with (tmp_path / f"cp_ab_stage_rank{rank}.csv").open() as f:
            rows = {(r["strategy"], r["direction"]): r for r in csv.DictReader(f)}
        assert set(rows) == {(s, d) for s in ("magi", "ulysses") for d in ("fwd", "bwd")}
        for d in ("fwd", "bwd"):
            magi, ulysses = rows["magi", d], rows["ulysses", d]
            assert int(magi["kernels"]) >= int(magi["calls"]) >= 2  # warm-up + timed
            assert int(magi["waits"]) >= int(magi["calls"])  # every call waits for its cast
            assert float(magi["kernel_ms_per_call"]) > 0
            assert int(ulysses["kernels"]) == int(ulysses["fills"]) == 0
        # causal at cp 2 runs the fused stage: each forward fills its buffer once
        assert int(rows["magi", "fwd"]["fills"]) == int(rows["magi", "fwd"]["kernels"])
        with (tmp_path / f"cp_ab_calls_rank{rank}.csv").open() as f:
            per_call = collections.Counter((r["strategy"], r["direction"])
                                           for r in csv.DictReader(f))
        assert per_call == {k: int(r["calls"]) for k, r in rows.items()}  # a row a call


@pytest.mark.parametrize("clock", ["key", "both"])
def test_the_keys_clock_times_blocks_the_keys_way(monkeypatch, clock):
    """--clock key: every block timed by the key's _Clock, one label per (strategy,
    direction), none by the runner's time_cuda_ms, rows labelled <strategy>@key; --clock both:
    each block both ways in turn. The key clock's seconds come back as ms."""
    cp_ab = _cp_ab()
    seen = []

    class KeyClock:
        def __init__(self, group, device, min_iters):
            assert min_iters == 2

        def seconds(self, fn, label):
            fn()
            seen.append(("key", label))
            return 0.002

    def runner_timing(fn, *args):
        if clock == "key":
            raise AssertionError("timed the runner's way")
        seen.append(("runner", None))
        return 5.0
    monkeypatch.setattr(cp_ab, "_Clock", KeyClock)
    assert cp_ab.parse_args(["--clock", clock], "probe").clock == clock
    times = _rounds(monkeypatch, runner_timing, ["a", "b"], clock=clock)
    blocks = [[("key", (s, d))] if clock == "key" else [("runner", None), ("key", (s, d))]
              for _ in range(2) for s in "ab" for d in ("fwd", "bwd")]
    assert seen == [b for pair in blocks for b in pair]
    want = {("causal", f"{s}@key", d): [2.0, 2.0] for s in "ab" for d in ("fwd", "bwd")}
    if clock == "both":
        want.update({("causal", s, d): [5.0, 5.0] for s in "ab" for d in ("fwd", "bwd")})
    assert times == want
