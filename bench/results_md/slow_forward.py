"""The second magi key's slow forward (sessions 50-55): a magi forward timed right after a
magi backward ran slower than the same key elsewhere, in cp_ab.py's interleaved rounds (Triton,
block_causal_document, 16k a GPU, cp 2). What each session ruled out, and the per-call rows and
clocks that placed it on the GPU, in what ran before the block (notes/magi_cp.md). The
benchmark's timing settles before every block, so its tables do not carry it."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ._common import _ab_medians, _helper
from ._paths import RESULTS
from .h200x2 import S50, S51, S52, S55


# -- session 50 (2 H200s): cp_ab.py launches, Triton, 16k a GPU, cp 2; magi_twin is
# configs/cp/magi.yaml under another name, written by the device command
ORDER_AB_S50 = {"cp=[magi, magi_twin, hybrid_cp]": "order_twin",
                "cp=[magi_static, magi, hybrid_cp]": "order_static_first",
                "cp=[magi, magi_static, hybrid_cp]": "order_magi_first",
                "cp=[magi, magi_twin, hybrid_cp], MAGI_ATTENTION_CACHED_LAUNCH=0":
                    "order_twin_nocache"}
# block_causal_document alone: (what was timed, what each forward followed), file
PRECEDING_S50 = {
    "cp=[magi, magi_twin], no garbage collection": "no_hybrid",
    "cp=[hybrid_cp, magi, magi_twin], no garbage collection": "hybrid_first",
    "cp=[magi, magi_twin, hybrid_cp], no garbage collection": "before_none",
    "cp=[magi, hybrid_cp, magi_twin], no garbage collection": "twin_after_hybrid",
    "forwards only, no garbage collection": "fwd_only",
    "each strategy's backward before its forward, no garbage collection": "bwd_first",
    "cuda empty_cache before each strategy, no garbage collection": "before_empty_cache",
    "gc.collect() before each strategy (a hook in the launch)": "before_gc",
    "cp_ab.py --keep-garbage (d2cee15's timing)": "keep_garbage",
    "cp_ab.py, time_cuda_ms collecting first (this session's change)": "collect",
}


def order_ab_s50_table() -> str:
    """Per launch and mask: the first magi key's forward (and backward) time over the second's
    (< 1: the key built second is slower), and HybridCP's forward over the first key's."""
    lines = ["| launch | mask | fwd first / second key | bwd first / second key | "
             "fwd hybrid_cp / first key |", "|---|---|---|---|---|"]
    for launch, name in ORDER_AB_S50.items():
        med = _ab_medians(f"{S50}/{name}.csv")
        for mask in dict.fromkeys(m for m, _, _ in med):
            first, second = [s for m, d, s in med if m == mask and d == "fwd"
                             and s.startswith("magi")]
            ratio = [med[mask, d, first] / med[mask, d, second] for d in ("fwd", "bwd")]
            lines.append(f"| {launch} | {mask} | {ratio[0]:.3f} | {ratio[1]:.3f} | "
                         f"{med[mask, 'fwd', 'hybrid_cp'] / med[mask, 'fwd', first]:.3f} |")
    return "\n".join(lines)


def preceding_s50_table() -> str:
    """block_causal_document: each strategy's median forward (ms, the slower rank's, 5 rounds)
    per launch, and the slower magi key's over the faster one's."""
    lines = ["| launch | magi fwd ms | magi_twin fwd ms | hybrid_cp fwd ms | "
             "slower / faster magi key |", "|---|---|---|---|---|"]
    for launch, name in PRECEDING_S50.items():
        med = _ab_medians(f"{S50}/{name}.csv")
        ms = {s: med.get(("block_causal_document", "fwd", s)) for s in
              ("magi", "magi_twin", "hybrid_cp")}
        keys = [ms["magi"], ms["magi_twin"]]
        lines.append(f"| {launch} | " + " | ".join("-" if v is None else f"{v:.3f}"
                                                   for v in ms.values())
                     + f" | {max(keys) / min(keys):.3f} |")
    return "\n".join(lines)


def probe_s50() -> str:
    """The probe after its rounds, per rank: each key's forwards issued back to back (host us
    a call, wall us a call, whether one call synchronises), then the attention kernel's mean
    device time over 10 profiled calls."""
    out = []
    for rank in (0, 1):
        host = _helper(f"{S50}/probe_host_rank{rank}.csv").set_index("strategy")
        kernels = _helper(f"{S50}/probe_kernels_rank{rank}.csv")
        for key in ("magi", "magi_twin"):
            h = host.loc[key]
            syncs = "no sync" if h.first_sync == "-" else "a sync"
            attn = kernels[(kernels.strategy == key) & (kernels.kernel == "_fwd_kernel")]
            out.append(f"rank {rank} {key}: host {h.host_us:.0f} us / wall {h.wall_us:.0f} us "
                       f"a call back to back ({syncs}), attention kernel "
                       f"{attn.mean_us.iloc[0]:.0f} us profiled")
    return "; ".join(out)


def second_key_rounds_s50() -> str:
    """The order A/B's block_causal_document forward: the second magi key's round 0 against
    the first key's rounds, and its rounds 1 on (ms ranges over the four launches)."""
    first, zero, later = [], [], []
    for name in ORDER_AB_S50.values():
        rows = _helper(f"{S50}/{name}.csv")
        fwd = rows[(rows["mask"] == "block_causal_document") & (rows.direction == "fwd")]
        keys = list(dict.fromkeys(s for s in fwd.strategy if s.startswith("magi")))
        first += list(fwd[fwd.strategy == keys[0]].ms)
        second = fwd[fwd.strategy == keys[1]]
        zero += list(second[second["round"] == 0].ms)
        later += list(second[second["round"] > 0].ms)
    return (f"the second key's round 0 {min(zero):.2f}-{max(zero):.2f} ms (the first key's "
            f"rounds {min(first):.2f}-{max(first):.2f}), its rounds 1-4 "
            f"{min(later):.2f}-{max(later):.2f} ms")


def probe1_s50() -> str:
    """The first probe (4f2a4f4's without host times, its forwards profiled after the rounds):
    each magi key's attention kernel, mean us over 10 calls, per rank."""
    out = []
    for rank in (0, 1):
        kernels = _helper(f"{S50}/probe1_kernels_rank{rank}.csv")
        attn = kernels[kernels.kernel == "_fwd_kernel"].set_index("strategy").mean_us
        out.append(f"rank {rank} {attn['magi']:.0f} / {attn['magi_twin']:.0f} us")
    return ", ".join(out)


# -- session 51 (2 H200s): session 50's probe again, with and without the collection
PROBE_S51 = {"--keep-garbage": "kg", "collecting (the benchmark's timing)": "gc"}


def probe_s51() -> str:
    """block_causal_document, Triton 16k cp 2: magi_twin's median over magi's in the probe's
    rounds (fwd, bwd), then per rank the profiled round's forward ms of both keys and the NCCL
    time beside the attention kernel (the probe's log lines)."""
    out = []
    for label, name in PROBE_S51.items():
        med = _ab_medians(f"{S51}/probe_{name}.csv")
        ratios = "/".join(f"{_twin_over_magi(med, d):.3f}" for d in ("fwd", "bwd"))
        log = (RESULTS / S51 / "logs" / f"probe_{name}.log").read_text()
        prof = re.findall(r"rank (\d) (magi(?:_twin)?): fwd ([\d.]+) ms, attention kernel "
                          r"(\d+) us a call, NCCL beside it (\d+) us", log)
        fwd = {(r, k): float(ms) for r, k, ms, _, _ in prof}
        nccl = max(int(n) for *_, n in prof)
        out.append(f"{label}: rounds twin / magi {ratios} (fwd/bwd); profiled round twin / magi "
                   f"fwd {fwd['0', 'magi_twin'] / fwd['0', 'magi']:.3f}, NCCL beside the "
                   f"attention kernel at most {nccl} us")
    return "; ".join(out)


# -- session 52 (2 H200s, 08b877c): what in the collection removes the slow state.
# cp_ab.py launches (block_causal_document, Triton, 16k, cp 2, cp=[magi,magi_twin,hybrid_cp],
# 5 rounds): what ran before each timing block -> the launch's folder under cp_s52/probe
PROBE_S52 = {
    "nothing (--keep-garbage; call 1)": "gc_keepgarbage",
    "nothing (--keep-garbage; call 2)": "p_keepgarbage",
    "nothing, the automatic collector off in the block (--gc-off)": "gc_keepgarbagegcoff",
    "the census after the previous block (two full collections)": "gc_keepgarbagecensus",
    "a 20 ms host pause (--pause-ms 20)": "p_keepgarbagepausems20",
    "a 100 ms host pause (--pause-ms 100)": "p_keepgarbagepausems100",
    "a full collection (the benchmark's timing)": "p_",
}


def _twin_over_magi(med: dict, direction: str, mask: str = "block_causal_document") -> float:
    """magi_twin's median over magi's in one cp_ab.py file's medians (> 1: the twin is slower)."""
    return med[mask, direction, "magi_twin"] / med[mask, direction, "magi"]


def _twin_table(launches: dict[str, str]) -> str:
    """Per launch ({label: its folder under results/}): magi_twin's median over magi's (> 1: the
    twin, timed right after magi's backward, is slower), forward and backward."""
    lines = ["| before each timing block | twin / magi fwd | twin / magi bwd |", "|---|---|---|"]
    for label, folder in launches.items():
        med = _ab_medians(f"{folder}/cp_ab.csv")
        lines.append(f"| {label} | "
                     + " | ".join(f"{_twin_over_magi(med, d):.3f}" for d in ("fwd", "bwd")) + " |")
    return "\n".join(lines)


def probe_s52_table() -> str:
    return _twin_table({label: f"{S52}/probe/{name}" for label, name in PROBE_S52.items()})


def _probe_rows(kind: str, folders) -> pd.DataFrame:
    """Both ranks' ``cp_ab_<kind>_rank<r>.csv`` rows of the launches' folders, with a rank
    column."""
    return pd.concat(_helper(f"{folder}/cp_ab_{kind}_rank{r}.csv").assign(rank=r)
                     for folder in folders for r in (0, 1))


def garbage_s52() -> str:
    """What the census found after every block (both ranks), and what the automatic
    collections inside the blocks of the first --keep-garbage launch collected."""
    census = _probe_rows("census", [f"{S52}/probe/gc_keepgarbagecensus"])
    gcs = _probe_rows("gc", [f"{S52}/probe/gc_keepgarbage"])
    return (f"the census found at most {census.objects.max()} objects of cyclic garbage after "
            f"any of {len(census)} blocks; the {len(gcs)} automatic collections inside the "
            f"blocks without it collected {gcs.collected.sum()} objects")


def collection_ms_s52() -> str:
    """How long the benchmark's full collection before each block took (its launch, both
    ranks): the pause it gave."""
    gcs = _probe_rows("gc", [f"{S52}/probe/p_"])
    full = gcs[gcs.generation == 2].ms
    return f"{full.median():.0f} ms (median of {len(full)}; {full.min():.0f}-{full.max():.0f})"


# -- session 53: where the slow state is, cp_ab.py launches as session 52's (block_causal_document,
# Triton, 16k, cp 2, cp=[magi,magi_twin,hybrid_cp], 5 rounds, --keep-garbage): on GPUs 0-1 of a
# 4-H100 node with a synchronize before each block (94814e7), then on 2 H200s with each block's
# host time a call (c032760), in a third launch the GPUs' clocks logged every 20 ms, then two under
# CUDA_DEVICE_MAX_CONNECTIONS=8 instead of cp_ab's 1 (bc75d23)
PROBE_S53 = {
    "nothing (4-H100 node, GPUs 0-1)": "h100x4/cp_s53/sync/a1_keepgarbage",
    "torch.cuda.synchronize(), every stream (same node; launch 1)":
        "h100x4/cp_s53/sync/a2_keepgarbagesyncfirst",
    "torch.cuda.synchronize(), every stream (same node; launch 2)":
        "h100x4/cp_s53/sync/a3_keepgarbagesyncfirst",
    "nothing (2 H200s, host rows)": "h200x2/cp_s53/probe/b1_keepgarbage",
    "a 100 ms host pause (2 H200s, host rows)": "h200x2/cp_s53/probe/b2_keepgarbagepausems100",
    "nothing (2 H200s, host rows and the clock log)": "h200x2/cp_s53/probe/c_keepgarbage",
    "nothing, 8 hardware queues (2 H200s; launch 1)": "h200x2/cp_s53/probe/q8_1",
    "nothing, 8 hardware queues (2 H200s; launch 2)": "h200x2/cp_s53/probe/q8_2",
}
SLOW_S53 = ("b1_keepgarbage", "c_keepgarbage")  # the H200 launches that kept the slow state
SMI_S53 = "h200x2/cp_s53/probe/c_keepgarbage_smi.csv"


def probe_s53_table() -> str:
    return _twin_table(PROBE_S53)


def alloc_s53() -> str:
    """The allocator's counters over every block after round 0, all six launches, both ranks."""
    rows = _probe_rows("alloc", PROBE_S53.values())
    later = rows[rows["round"] > 0]
    return (f"{later.num_device_alloc.sum()} device allocations, {later.num_alloc_retries.sum()} "
            f"retries and {later.num_sync_all_streams.sum()} all-stream syncs in {len(later)} "
            f"blocks after round 0 (round 0: {rows[rows['round'] == 0].num_device_alloc.sum()} "
            f"allocations)")


def host_s53() -> str:
    """The slow H200 launches' forwards in rounds 1-4: the host's wall ms a call (median over
    blocks and ranks), its CPU share, and the GPU's ms a call (the rounds' medians)."""
    folders = [f"h200x2/cp_s53/probe/{name}" for name in SLOW_S53]
    host = _probe_rows("host", folders)
    host = host[(host["round"] > 0) & (host.direction == "fwd")]
    gpu = pd.concat(_helper(f"{folder}/cp_ab.csv") for folder in folders)
    gpu = gpu[(gpu["round"] > 0) & (gpu.direction == "fwd")]
    out = []
    for s in ("magi", "magi_twin"):
        h = host[host.strategy == s]
        out.append(f"{s} host {h.wall_ms_per_call.median():.2f} ms a call "
                   f"(CPU / wall {(h.cpu_ms_per_call / h.wall_ms_per_call).median():.2f}) "
                   f"against GPU {gpu[gpu.strategy == s].ms.median():.2f} ms")
    return "; ".join(out)


# the fields both clock-logged launches asked nvidia-smi for (--query-gpu=timestamp,index,
# clocks.sm,clocks.mem,power.draw,temperature.gpu,<the clock event reasons>)
SMI_COLUMNS = ("t", "gpu", "sm", "mem", "power", "temp", "reasons")


def _smi_log(relpath: str) -> pd.DataFrame:
    """An nvidia-smi log of SMI_COLUMNS, with its header line or without (``noheader``), units
    or not (``nounits``): t in unix seconds, gpu an int, sm and power numbers, reasons the hex."""
    smi = pd.read_csv(RESULTS / relpath, header=None, names=SMI_COLUMNS, skipinitialspace=True,
                      dtype=str)
    smi = smi[smi.t != "timestamp"]
    number = lambda column: smi[column].str.split().str[0].astype(float)  # noqa: E731
    return smi.assign(
        t=pd.to_datetime(smi.t, format="%Y/%m/%d %H:%M:%S.%f", utc=True).map(
            lambda t: t.timestamp()),
        gpu=smi.gpu.astype(int), sm=number("sm"), power=number("power"),
        reasons=smi.reasons.str.strip())


def clocks_s53() -> str:
    """The clock-logged launch: each strategy's forward blocks of rounds 1-4, the median SM clock
    per rank over the samples inside them, the power, and the throttle reasons logged."""
    smi = _smi_log(SMI_S53)
    host = _probe_rows("host", ["h200x2/cp_s53/probe/c_keepgarbage"])
    host = host[(host["round"] > 0) & (host.direction == "fwd")]
    inside = [smi[(smi.gpu == b["rank"]) & smi.t.between(b.start_unix_s, b.end_unix_s)]
              .assign(strategy=b.strategy) for _, b in host.iterrows()]
    samples = pd.concat(inside)
    per = samples.groupby(["strategy", "gpu"]).sm.median()
    out = [f"{s} " + " / ".join(f"{per[s, r]:.0f}" for r in (0, 1)) + " MHz"
           for s in ("magi", "magi_twin", "hybrid_cp")]
    reasons = ", ".join(sorted(samples.reasons.unique()))
    return (", ".join(out) + f" (GPU 0 / 1); power median {samples.power.median():.0f} W; "
            f"throttle reasons {reasons} ({len(samples)} samples)")


# -- session 54: the slow state's stage marks (cp_ab.py --keep-garbage --stage-events, Triton,
# block_causal_document 16k, cp 2, cp=[magi,magi_twin,hybrid_cp], 5 rounds): two launches on
# GPUs 0-1 of the 4-H200 node at 573b8d5 (kernel and wait marks), two on 2 H200s at 34fec43
# (the fused buffer's fill marked too)
STAGE_S54 = {"4-H200 node, launch 1": "h200x4/cp_s54/probe/e1",
             "4-H200 node, launch 2": "h200x4/cp_s54/probe/e2",
             "2 H200s, launch 1": "h200x2/cp_s54/probe/f1",
             "2 H200s, launch 2": "h200x2/cp_s54/probe/f2"}
STAGE_SPANS = ("kernel", "wait", "fill")


def _stage_medians(folder: str) -> pd.DataFrame:
    """One launch's forward blocks of rounds 1-4 per key (index: strategy): rank_ms (the timed
    calls' median), block (the block's wall ms a call) and the marked spans' ms a call, each the
    two ranks' mean, then the median over the rounds."""
    key_cols = ["strategy", "round"]
    host, stage = _probe_rows("host", [folder]), _probe_rows("stage", [folder])
    host = host[(host["round"] > 0) & (host.direction == "fwd")].assign(
        block=lambda h: (h.end_unix_s - h.start_unix_s) * 1e3 / h.calls)
    stage = stage[(stage["round"] > 0) & (stage.direction == "fwd")]
    spans = [f"{s}_ms_per_call" for s in STAGE_SPANS if f"{s}_ms_per_call" in stage]
    per_round = host.groupby(key_cols)[["rank_ms", "block"]].mean().join(
        stage.groupby(key_cols)[spans].mean())
    return per_round.groupby("strategy").median()


def stage_s54_table() -> str:
    """Per launch and key, the forward blocks of rounds 1-4 (medians over the rounds of the
    two ranks' mean): the timed calls' median ms, the whole block's ms a call (its wall span
    over its calls: warm-up, timed and the closing synchronise) and the marked spans' ms a
    call over all the block's calls ("-": not marked in that launch)."""
    lines = ["| launch | key | timed median ms | block ms a call | kernel | wait | fill |",
             "|---|---|---|---|---|---|---|"]
    for label, folder in STAGE_S54.items():
        medians = _stage_medians(folder)
        for key in ("magi", "magi_twin"):
            med = medians.loc[key]
            marked = [f"{med[f'{s}_ms_per_call']:.2f}" if f"{s}_ms_per_call" in med else "-"
                      for s in STAGE_SPANS]
            lines.append(f"| {label} | {key} | {med.rank_ms:.2f} | {med.block:.2f} | "
                         + " | ".join(marked) + " |")
    return "\n".join(lines)


def stage_s54_gaps() -> str:
    """Over the four launches: the twin's timed median above magi's (ms, range) and the largest
    gap between their whole blocks' ms a call."""
    timed, block = [], []
    for folder in STAGE_S54.values():
        med = _stage_medians(folder)
        timed.append(med.rank_ms["magi_twin"] - med.rank_ms["magi"])
        block.append(abs(med.block["magi_twin"] - med.block["magi"]))
    return (f"the twin's timed median {min(timed):.2f}-{max(timed):.2f} ms above magi's; their "
            f"blocks' ms a call at most {max(block):.2f} ms apart")


# -- session 55 (df6f59f): the per-call rows (cp_ab.py --keep-garbage --per-call, as above):
# three launches on 2 H200s in the usual order (the third beside nvidia-smi every 10 ms), one on
# 2 H100s with hybrid_cp moved between the two magi keys (nvidia-smi beside it), one on 2 H100s in
# the usual order (scripts/dev/gpu_clock_log.py's NVML log beside it)
PERCALL_S55 = {"2 H200s, launch 1": (f"{S55}/probe/g1", "magi, magi_twin, hybrid_cp"),
               "2 H200s, launch 2": (f"{S55}/probe/g2", "magi, magi_twin, hybrid_cp"),
               "2 H200s, launch 3 (clocks)": (f"{S55}/probe/g3", "magi, magi_twin, hybrid_cp"),
               "2 H100s, order swapped (clocks)": ("h100x2/cp_s55/probe/g4",
                                                  "magi, hybrid_cp, magi_twin"),
               "2 H100s (NVML clocks)": ("h100x2/cp_s55/probe/g5", "magi, magi_twin, hybrid_cp")}
SMI_S55 = (f"{S55}/probe/smi_g3.csv.gz", f"{S55}/probe/g3")
TIMED_CALLS = 6  # hardware.repeat of experiment=cp_h200x2: the last calls of a block are timed
LATE_WARMUP = 20  # the warm-up calls just before the timed ones


def _percall(folder: str) -> pd.DataFrame:
    """The forward calls of rounds 1-4 of one --per-call launch, both ranks, each call's part
    of its block: early warm-up, late warm-up (the LATE_WARMUP before the timed) or timed."""
    calls = _probe_rows("calls", [folder])
    calls = calls[(calls["round"] > 0) & (calls.direction == "fwd")].copy()
    block = ["strategy", "round", "rank"]
    from_end = calls.groupby(block).call.transform("max") - calls.call
    calls["part"] = "early"
    calls.loc[from_end < TIMED_CALLS + LATE_WARMUP, "part"] = "late"
    calls.loc[from_end < TIMED_CALLS, "part"] = "timed"
    return calls[calls.call >= 3]  # the first calls of a block carry its start


def percall_s55_table() -> str:
    """Per launch and magi key, forwards of rounds 1-4 (both ranks): the timed median (cp_ab's,
    median over the rounds) and the mean GPU ms a call (CUDA events around each call) of the
    early warm-up, the last LATE_WARMUP warm-up calls and the timed calls (medians: a block's
    first timed call carries the synchronise before it), and the timed calls' host ms a call."""
    lines = ["| launch (order in a round) | key | timed median ms | GPU ms a call: early warm-up | "
             f"last {LATE_WARMUP} warm-up | timed | timed calls' host ms |",
             "|---|---|---|---|---|---|---|"]
    for label, (folder, order) in PERCALL_S55.items():
        calls, med = _percall(folder), _helper(f"{folder}/cp_ab.csv")
        for key in ("magi", "magi_twin"):
            c = calls[calls.strategy == key]
            gpu = c.groupby("part").gpu_ms.median()
            timed = med[(med.strategy == key) & (med.direction == "fwd") & (med["round"] > 0)]
            lines.append(f"| {label} ({order}) | {key} | {timed.ms.median():.2f} | "
                         f"{gpu.early:.2f} | {gpu.late:.2f} | {gpu.timed:.2f} | "
                         f"{c[c.part == 'timed'].host_ms.median():.2f} |")
    return "\n".join(lines)


def _call_clocks(folder: str, clocks: pd.DataFrame) -> pd.DataFrame:
    """Rank 0's magi-key forward calls of rounds 1-4 with the lower of the two GPUs' SM clocks
    at the call's end on the GPU (the block's start plus the GPU ms of its calls so far: its
    queue was empty at the block's start)."""
    host, calls = _probe_rows("host", [folder]), _probe_rows("calls", [folder])
    rows = []
    for _, b in host[(host["rank"] == 0) & (host.direction == "fwd") & (host["round"] > 0)
                     & host.strategy.isin(["magi", "magi_twin"])].iterrows():
        c = calls[(calls["rank"] == 0) & (calls.strategy == b.strategy)
                  & (calls.direction == "fwd") & (calls["round"] == b["round"])]
        ends = b.start_unix_s + c.gpu_ms.cumsum().to_numpy() / 1e3
        # each GPU's last reading at or before the call's end (none before: NaN)
        readings = []
        for _, g in clocks.groupby("gpu"):
            last = np.searchsorted(g.t.to_numpy(), ends, side="right") - 1
            readings.append(np.where(last >= 0, g.sm.to_numpy()[last.clip(0)], np.nan))
        rows.append(c.assign(low_mhz=np.min(readings, axis=0)).iloc[3:])
    return pd.concat(rows)


CLOCK_BINS_S55 = (0, 1450, 1550, 1650, 1750, 2100)


def clocks_s55_table() -> str:
    """Launch 3 on 2 H200s: its magi keys' forward calls (rank 0, rounds 1-4) by the lower SM
    clock of the two GPUs at the call (nvidia-smi's reading, new every ~100 ms), median GPU ms."""
    calls = _call_clocks(SMI_S55[1], _smi_log(SMI_S55[0]))
    calls["bin"] = pd.cut(calls.low_mhz, CLOCK_BINS_S55)
    lines = ["| lower SM clock, MHz | calls: magi | magi_twin | median GPU ms a call |",
             "|---|---|---|---|"]
    for interval, g in calls.groupby("bin", observed=True):
        n = g.strategy.value_counts()
        lines.append(f"| {interval.left:.0f}-{interval.right:.0f} | {n.get('magi', 0)} | "
                     f"{n.get('magi_twin', 0)} | {g.gpu_ms.median():.2f} |")
    return "\n".join(lines)
