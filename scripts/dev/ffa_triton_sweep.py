"""Tile-config and variant sweep of the Triton FFA kernels against FA4 and compiled FlexAttention,
in one process (issue 14). GQA 64:8, head_dim 128, bf16 by default.

    PYTHONUNBUFFERED=1 python scripts/dev/ffa_triton_sweep.py --out $OUT 2>&1 | tee $OUT/sweep.log

Stages:
1. Correctness, in a child process (a compiler crash in an experimental variant, e.g. warp
   specialisation, costs only that variant): every variant on a small case of each mask (S=2048,
   GQA 8:2, odd-free) against kernels.reference in fp32; relative L2 errors in check.csv. A
   variant that fails or crashes is not timed.
2. Timing: for S in --seqlens, for each mask: every passing Triton variant (fwd variants, then bwd
   variants), then FA4 (bench adapter, if importable) and compiled Flex (bench adapter). One CSV
   row per measurement, appended and flushed at once (sweep.csv), so a timeout loses nothing.
   Stops starting new cells after --deadline-s, then prints the summary table (best Triton
   variant per cell and its ratio to each peer).

Triton variants are plans built once (plan_block_sparse) and the launch functions called
directly, so plan building and lookup are outside the timed region, as with a cached mask object.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict

import torch

# this checkout's packages first (the script runs as a file, and another checkout may be installed)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from magi_attention.kernels.triton.configs import BwdConfig, FwdConfig

MASKS = ("full", "causal", "causal_document", "sliding_window_causal", "block_causal_document")

# Forward variants: name -> FwdConfig(block_m, block_n, num_warps, num_stages, partial_stages, ...)
FWD_VARIANTS = {
    "fwd_ptr_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2),  # v2 default
    "fwd_ptr_run_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, contiguous_full=True),
    "fwd_tma_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True),
    "fwd_tma_128x128_w8_s3_p2": FwdConfig(128, 128, 8, 3, 2, use_tma=True),
    "fwd_tma_ws_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, warp_specialize=True),
    "fwd_tma_ws_128x128_w8_s2_p2": FwdConfig(128, 128, 8, 2, 2, use_tma=True, warp_specialize=True),
    "fwd_tma_run_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, contiguous_full=True),
    "fwd_tma_run_128x64_w4_s2_p2": FwdConfig(128, 64, 4, 2, 2, use_tma=True, contiguous_full=True),
    "fwd_tma_ws_run_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, warp_specialize=True,
                                                contiguous_full=True),
    # session 15 (scripts/dev/triton_resources.py, no GPU): the default 128x64 w4 s3 runs at 255
    # registers and spills ~200 bytes; at 8 warps it needs 130-148 (1 program per SM), and
    # capped at 128 it compiles without spills: 2 programs of 8 warps per SM
    "fwd_tma_128x64_w8_s3_p2_r128": FwdConfig(128, 64, 8, 3, 2, use_tma=True, max_registers=128),
    "fwd_tma_128x64_w8_s2_p2_r128": FwdConfig(128, 64, 8, 2, 2, use_tma=True, max_registers=128),
    # session 21: conditional rescaling (rs8: only when a row max grows by > 8 log2 units) and
    # the next tile's QK^T issued before this tile's softmax (pf)
    "fwd_tma_rs8_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, rescale_threshold=8.0),
    "fwd_tma_rs8_128x64_w8_s3_p2_r128": FwdConfig(128, 64, 8, 3, 2, use_tma=True, max_registers=128,
                                                  rescale_threshold=8.0),
    "fwd_tma_pf_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, prefetch_qk=True),
    "fwd_tma_pf_128x64_w8_s3_p2": FwdConfig(128, 64, 8, 3, 2, use_tma=True, prefetch_qk=True),
    "fwd_tma_pf_128x128_w8_s2_p2": FwdConfig(128, 128, 8, 2, 2, use_tma=True, prefetch_qk=True),
    "fwd_tma_pf_rs8_128x64_w8_s3_p2": FwdConfig(128, 64, 8, 3, 2, use_tma=True, prefetch_qk=True,
                                                rescale_threshold=8.0),
    "fwd_tma_pf_rs8_128x128_w8_s2_p2": FwdConfig(128, 128, 8, 2, 2, use_tma=True,
                                                 prefetch_qk=True, rescale_threshold=8.0),
    # session 39: PackGQA (a kv head's q heads in one program, q tiles of 128 // group
    # positions), at the default and the short-row tiles, K/V by TMA or pointers
    "fwd_tma_pack_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, use_tma=True, pack_gqa=True),
    "fwd_tma_pack_128x64_w8_s3_p2_r128": FwdConfig(128, 64, 8, 3, 2, use_tma=True,
                                                   max_registers=128, pack_gqa=True),
    "fwd_ptr_pack_128x64_w4_s3_p2": FwdConfig(128, 64, 4, 3, 2, pack_gqa=True),
    # session 39: head_dim 256 (configs.FWD_WIDE, and 64-row tiles at two programs an SM)
    "fwd_wide_128x64_w8_s2_p1": FwdConfig(128, 64, 8, 2, 1),
    "fwd_wide_64x32_w4_s3_p1": FwdConfig(64, 32, 4, 3, 1),
    "fwd_wide_64x64_w4_s2_p1": FwdConfig(64, 64, 4, 2, 1),
}
# Backward variants: name -> (BwdConfig(block_m1, block_n1, block_m2, block_n2, warps, stages,
# partial_stages), deterministic). block_m1 = q rows per step, block_n1 = keys per program.
BWD_VARIANTS = {
    "bwd_det_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2), True),  # v2 default, two kernels
    "bwd_onepass_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2), False),
    # the one-pass step also holds a [block_m1, D] fp32 dq tile: at 64x64 with 4 warps that is
    # 64 more registers per thread than the dk/dv kernel (spill risk), hence the 8-warp variants
    "bwd_onepass_64x64_w8_s3_p2": (BwdConfig(64, 64, 64, 64, 8, 3, 2), False),
    "bwd_onepass_64x128_w8_s2_p2": (BwdConfig(64, 128, 64, 64, 8, 2, 2), False),
    "bwd_onepass_64x128_w8_s3_p2": (BwdConfig(64, 128, 64, 64, 8, 3, 2), False),
    "bwd_onepass_128x64_w8_s2_p2": (BwdConfig(128, 64, 64, 64, 8, 2, 2), False),
    "bwd_onepass_tma_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2, use_tma=True), False),
    "bwd_onepass_tma_64x64_w8_s3_p2": (BwdConfig(64, 64, 64, 64, 8, 3, 2, use_tma=True), False),
    "bwd_onepass_tma_64x128_w8_s2_p2": (BwdConfig(64, 128, 64, 64, 8, 2, 2, use_tma=True), False),
    # session 14: the ordered path with TMA loads in the dk/dv programs, as one fused launch
    # (dk/dv and dq programs in one grid, FlexAttention's layout), and both
    "bwd_det_tma_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2, use_tma=True), True),
    "bwd_det_fused_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2, fused_launch=True), True),
    "bwd_det_fused_tma_64x64_w4_s3_p2": (BwdConfig(64, 64, 64, 64, 4, 3, 2, use_tma=True,
                                                   fused_launch=True), True),
    "bwd_det_fused_64x128_w8_s3_p1": (BwdConfig(64, 128, 128, 64, 8, 3, 1, fused_launch=True), True),
    # session 15 (triton_resources.py): the dk/dv kernel spills at every config above; these two
    # keep 2 programs per SM with fewer spills (s2: 64/72 bytes) or none (32-row q steps)
    "bwd_det_tma_64x64_w4_s2_p2": (BwdConfig(64, 64, 64, 64, 4, 2, 2, use_tma=True), True),
    "bwd_det_tma_32x64_w4_s3_p2": (BwdConfig(32, 64, 64, 64, 4, 3, 2, use_tma=True), True),
    # session 39: head_dim 256 (configs.BWD_WIDE, then wider key tiles at 8 warps)
    "bwd_det_wide_32x32_w4_s2_p1": (BwdConfig(32, 32, 32, 32, 4, 2, 1), True),
    "bwd_det_wide_32x64_w8_s2_p1": (BwdConfig(32, 64, 64, 32, 8, 2, 1), True),
    "bwd_det_wide_64x64_w8_s2_p1": (BwdConfig(64, 64, 64, 64, 8, 2, 1), True),
    "bwd_det_wide_32x32_w4_s3_p1": (BwdConfig(32, 32, 32, 32, 4, 3, 1), True),
}
# session 22: the Gluon one-pass backward (kernels/triton/gluon_backward.py, 64x128 tiles):
# name -> (dq mode, Q/dO ring slots); dq mode "none" skips dQ (a timing bound: dq stays zero)
GLUON_BWD_VARIANTS = {
    "bwd_gluon_tma_b2": ("tma", 2),
    "bwd_gluon_tma_b3": ("tma", 3),
    "bwd_gluon_atomic_b2": ("atomic", 2),
    "bwd_gluon_none_b2": ("none", 2),
    "bwd_gluon_noadd_b2": ("noadd", 2),  # the dQ MMAs without the add (a timing probe)
    # session 24: partial tiles' row intervals from the table in global memory (the session 23
    # kernel) or by TMA with Q; the first measured again last in each cell (the run's drift)
    "bwd_gluon_rowglobal_b2": ("tma", 2, {"row_tma": False}),
    "bwd_gluon_rowtma_b2": ("tma", 2, {"row_tma": True}),
    "bwd_gluon_rowglobal_again_b2": ("tma", 2, {"row_tma": False}),
    # session 41: partial tiles masked from each pair's bitmap (TMA with Q), any intervals a row
    "bwd_gluon_bits_b2": ("tma", 2, {"bits": True}),
    # measured and dropped (rows in results/h200/ffa_triton/s22_*, s23_*): own (no dS swap),
    # dkss, lag, store, 2buf, dklate, lateadd (session 22); writer (a dQ writer warp), dkfirst
    # (dK's MMA before the dS store), o2 (no rotation of the steps) (session 23); al (key tile k
    # starting at q tile k), hf (the kv heads of a key tile launched together), rowtma (partial
    # tiles' row intervals by TMA with Q) (session 24)
}
CHECK_SEQLEN = 2048
CHECK_TIMEOUT_S = 60  # per variant; a hung compile marks its variant crashed and the rest go on
DEVICE = "cuda"  # --device cpu: a dry run of the whole flow under TRITON_INTERPRET=1 (tiny sizes)
CHECK_HEADS = (8, 2)
FWD_TOL, BWD_TOL = 1e-2, 2e-2  # relative L2 error vs the fp32 reference, bf16 inputs
COLUMNS = ["time", "git_sha", "gpu_name", "torch_version", "triton_version", "kernel", "variant",
           "config", "mask", "seqlen", "num_heads_q", "num_heads_kv", "head_dim", "dtype",
           "direction", "flops", "runtime_ms", "tflops_per_s", "status", "message", "timing"]


def _git_sha() -> str:
    """The tree's commit as bench.provenance finds it (git, else PROVENANCE.json): the device
    copy's own .git can be stale, which labelled session 23's rows with an older commit."""
    from bench.provenance import current
    return current().label


def _doc_lens(seqlen: int) -> list[int]:
    from bench.data import sample_doc_lens
    return sample_doc_lens(seqlen, seed=0)


def _mask(name: str, seqlen: int):
    from bench.masks import build_mask
    return build_mask(name, seqlen, doc_lens=_doc_lens(seqlen), seed=0)


def _inputs(seqlen, hq, hk, d, seed=0):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float16  # the interpreter lacks bf16 dots
    mk = lambda h: torch.randn(seqlen, h, d, device=DEVICE, generator=g).to(dtype)
    return mk(hq), mk(hk), mk(hk), mk(hq)


def _plans(slices, seqlen, fcfg=None, bcfg=None, deterministic=False, group=1):
    from magi_attention.kernels.block_sparse import plan_block_sparse
    plan = lambda m, n: plan_block_sparse(slices, seqlen, seqlen, m, n, device=DEVICE)
    if fcfg is not None:  # PackGQA's q tiles hold block_m // group positions
        return plan(fcfg.block_m // group if fcfg.pack_gqa else fcfg.block_m, fcfg.block_n)
    return plan(bcfg.block_m1, bcfg.block_n1), (plan(bcfg.block_m2, bcfg.block_n2) if deterministic else None)


# How the timed calls run: "synced" waits for each call before the next (the GPU idles while the
# host launches the next call, so a call's host work counts), "queued" records every call's event
# pair back to back and synchronises once, as the bench harness (bench.metrics.time_cuda_ms)
# does, so a host that runs ahead of the GPU costs nothing. The bench's backward times came out
# 9-18% shorter than this sweep's (FFA most: the Gluon backward builds its TMA descriptors and
# launches four kernels per call on the host); running both modes in one run tells whether that
# is the whole gap.
TIMING = "synced"


def time_ms(fn, budget_ms: float) -> float:
    """Median of per-call CUDA-event times; one untimed call first (compile, warm-up), then as many
    calls as fit in budget_ms (3 to 100), timed as TIMING says."""
    if DEVICE != "cuda":
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    est = max(start.elapsed_time(end), 1e-3)
    n = int(min(100, max(3, budget_ms / est)))
    if TIMING == "queued":
        from bench.metrics import time_cuda_ms
        return time_cuda_ms(fn, warmup=0, repeat=n)
    times = []
    for _ in range(n):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _gluon_bwd(variant, slices, seqlen, args):
    """(plan, call) of a Gluon backward variant: call(do, q, k, v, out, lse) -> grads."""
    from magi_attention.kernels.block_sparse import (plan_block_sparse, slice_bounds_array,
                                                     union_row_intervals)
    from magi_attention.kernels.triton import gluon_backward as gb
    mode, num_buf, *options = GLUON_BWD_VARIANTS[variant]
    dq_mode = {"tma": gb.DQ_TMA, "atomic": gb.DQ_ATOMIC, "none": gb.DQ_NONE,
               "noadd": gb.DQ_NO_ADD}[mode]
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N, device=DEVICE)
    scale = args[0]
    options = dict(options[0]) if options else {}
    if options.pop("bits", False):  # partial tiles masked from bitmaps (session 41)
        options["bits"] = gb.key_tile_bits(plan, union_row_intervals(slice_bounds_array(slices),
                                                                     seqlen))
    return plan, lambda do, q, k, v, out, lse: gb.launch_bwd(do, q, k, v, out, lse, plan, scale,
                                                              dq_mode=dq_mode, num_buf=num_buf,
                                                              **options)


# ---- stage 1: correctness (child process) ----

def _rel(a, b) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def check_variants(names: list[str], progress_path: str, head_dim: int, seqlen: int) -> None:
    """Child: checks each variant on every mask at CHECK_SEQLEN; appends one JSON line per event."""
    from magi_attention.kernels import reference
    from magi_attention.kernels.plan import FlexAttnPlan
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.forward import launch_fwd

    hq, hk = CHECK_HEADS
    scale = head_dim ** -0.5
    cases = []
    for name in MASKS:
        slices = list(_mask(name, seqlen).slices)
        q, k, v, do = _inputs(seqlen, hq, hk, head_dim, seed=1)
        mask = FlexAttnPlan.from_slices(slices, seqlen, seqlen)
        f = lambda t: t.float()
        ro, rl, _ = reference.fwd(f(q), f(k), f(v), mask, scale)
        rg = reference.bwd(f(do), f(q), f(k), f(v), ro, rl, mask, scale)
        cases.append((name, slices, (q, k, v, do), ro, rl, rg))
    with open(progress_path, "a") as log:
        for variant in names:
            log.write(json.dumps({"event": "start", "variant": variant}) + "\n")
            log.flush()
            errs, status, message = {}, "ok", ""
            try:
                for name, slices, (q, k, v, do), ro, rl, rg in cases:
                    if variant in FWD_VARIANTS:
                        cfg = FWD_VARIANTS[variant]
                        plan = _plans(slices, seqlen, fcfg=cfg, group=hq // hk)
                        out, lse, _ = launch_fwd(q, k, v, plan, cfg, scale, 0.0, False)
                        ok = torch.isfinite(rl)
                        errs[name] = {"out": _rel(out, ro), "lse": _rel(lse[ok], rl[ok])}
                        bad = errs[name]["out"] > FWD_TOL or errs[name]["lse"] > FWD_TOL
                    elif variant in GLUON_BWD_VARIANTS:
                        _, call = _gluon_bwd(variant, slices, seqlen, (scale,))
                        grads = call(do, q, k, v, ro.to(q.dtype), rl)
                        keys = (("dk", "dv") if GLUON_BWD_VARIANTS[variant][0] in ("none", "noadd")
                                else ("dq", "dk", "dv"))
                        errs[name] = {key: _rel(a, b) for key, a, b in zip(("dq", "dk", "dv"), grads, rg)
                                      if key in keys}
                        bad = max(errs[name].values()) > BWD_TOL
                    else:
                        cfg, det = BWD_VARIANTS[variant]
                        plan_kv, plan_q = _plans(slices, seqlen, bcfg=cfg, deterministic=det)
                        args = (do, q, k, v, ro.to(q.dtype), rl, plan_kv, plan_q, cfg, scale, 0.0)
                        grads = launch_bwd(*args, deterministic=det)
                        errs[name] = {key: _rel(a, b) for key, a, b in zip(("dq", "dk", "dv"), grads, rg)}
                        bad = max(errs[name].values()) > BWD_TOL
                        if det:  # bitwise repeatable
                            again = launch_bwd(*args, deterministic=True)
                            if not all(torch.equal(a, b) for a, b in zip(grads, again)):
                                bad, message = True, "deterministic path not bitwise repeatable"
                    if bad or any(x != x for x in errs[name].values()):
                        status = "wrong"
                        message = message or f"{name}: {errs[name]}"
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a variant that cannot compile is a result
                status, message = "error", f"{type(e).__name__}: {str(e)[:300]}"
            log.write(json.dumps({"event": "done", "variant": variant, "status": status,
                                  "message": message, "errors": errs}) + "\n")
            log.flush()


def run_checks(names: list[str], out_dir: str, head_dim: int, seqlen: int) -> dict[str, dict]:
    """Parent: runs check_variants in children until every variant is done or crashed."""
    progress = os.path.join(out_dir, "check_progress.jsonl")
    results: dict[str, dict] = {}
    remaining = list(names)
    while remaining:
        try:
            proc = subprocess.run([sys.executable, __file__, "--check-child", ",".join(remaining),
                                   "--progress", progress, "--head-dim", str(head_dim),
                                   "--check-seqlen", str(seqlen), "--device", DEVICE],
                                  capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S * (len(remaining) + 1))
            died = f"child rc={proc.returncode}: {proc.stderr[-500:]}"
        except subprocess.TimeoutExpired:
            died = f"child timed out after {CHECK_TIMEOUT_S} s per variant (hung compile?)"
        started = None
        with open(progress) as f:
            for line in f:
                ev = json.loads(line)
                if ev["event"] == "start":
                    started = ev["variant"]
                elif ev["event"] == "done":
                    results[ev["variant"]] = ev
                    started = None
        if started is not None and started not in results:  # the child died inside this variant
            results[started] = {"variant": started, "status": "crash",
                                "message": died}
        new_remaining = [n for n in remaining if n not in results]
        if new_remaining == remaining:  # died before starting any: give up on all
            for n in remaining:
                results[n] = {"variant": n, "status": "crash", "message": died}
            break
        remaining = new_remaining
    with open(os.path.join(out_dir, "check.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "status", "message", "errors"])
        for n in names:
            r = results[n]
            w.writerow([n, r["status"], r.get("message", ""), json.dumps(r.get("errors", {}))])
    return results


# ---- stage 2: timing ----

class Writer:
    def __init__(self, path: str, meta: dict):
        self.path, self.meta, self.rows = path, meta, []
        new = not os.path.exists(path)
        self.file = open(path, "a", newline="")
        self.csv = csv.DictWriter(self.file, fieldnames=COLUMNS)
        if new:
            self.csv.writeheader()

    def row(self, **kw):
        row = {**self.meta, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **kw}
        self.csv.writerow({c: row.get(c, "") for c in COLUMNS})
        self.file.flush()
        self.rows.append(row)
        tf = row.get("tflops_per_s")
        result = (f"{row['runtime_ms']:.3f} ms {tf:.0f} TFLOPs/s" if tf
                  else str(row.get("message", ""))[:120])
        print(f"{row['mask']:>22} S={row['seqlen']:>6} {row['direction']} {row['kernel']:>6} "
              f"{row['variant']:<30} {row['status']:<11} {result}", flush=True)


def time_cell(name, seqlen, args, variants, writer):
    from bench.metrics import attn_flops
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.forward import launch_fwd

    hq, hk, d = args.num_heads_q, args.num_heads_kv, args.head_dim
    mask = _mask(name, seqlen)
    slices = list(mask.slices)
    flops = {dr: attn_flops(mask.area, hq, d, direction=dr) for dr in ("fwd", "bwd")}
    base = dict(mask=name, seqlen=seqlen, num_heads_q=hq, num_heads_kv=hk, head_dim=d, dtype="bfloat16")
    budget = args.budget_ms
    q, k, v, do = _inputs(seqlen, hq, hk, d)
    scale = d ** -0.5

    def record(kernel, variant, config, direction, fn):
        try:
            ms = time_ms(fn, budget)
            writer.row(**base, kernel=kernel, variant=variant, config=config, direction=direction,
                       flops=flops[direction], runtime_ms=ms,
                       tflops_per_s=flops[direction] / (ms * 1e-3) / 1e12, status="ok")
        except torch.cuda.OutOfMemoryError as e:
            writer.row(**base, kernel=kernel, variant=variant, config=config, direction=direction,
                       flops=flops[direction], status="oom", message=str(e)[:200])
        except Exception as e:  # noqa: BLE001 - one failing variant must not stop the sweep
            writer.row(**base, kernel=kernel, variant=variant, config=config, direction=direction,
                       flops=flops[direction], status="error", message=f"{type(e).__name__}: {str(e)[:300]}")
        if DEVICE == "cuda":
            torch.cuda.empty_cache()

    ref_out = ref_lse = None
    for variant in (v_ for v_ in FWD_VARIANTS if v_ in variants):
        cfg = FWD_VARIANTS[variant]
        plan = _plans(slices, seqlen, fcfg=cfg, group=hq // hk)
        record("ffa", variant, json.dumps(asdict(cfg)), "fwd",
               lambda: launch_fwd(q, k, v, plan, cfg, scale, 0.0, False))
        if ref_out is None:
            ref_out, ref_lse, _ = launch_fwd(q, k, v, plan, cfg, scale, 0.0, False)
    if ref_out is None:
        cfg = FWD_VARIANTS["fwd_ptr_128x64_w4_s3_p2"]
        ref_out, ref_lse, _ = launch_fwd(q, k, v, _plans(slices, seqlen, fcfg=cfg), cfg, scale, 0.0, False)
    for variant in (v_ for v_ in BWD_VARIANTS if v_ in variants):
        cfg, det = BWD_VARIANTS[variant]
        plan_kv, plan_q = _plans(slices, seqlen, bcfg=cfg, deterministic=det)
        record("ffa", variant, json.dumps({**asdict(cfg), "deterministic": det}), "bwd",
               lambda: launch_bwd(do, q, k, v, ref_out, ref_lse, plan_kv, plan_q, cfg, scale, 0.0,
                                  deterministic=det))
    for variant in (v_ for v_ in GLUON_BWD_VARIANTS if v_ in variants):
        _, call = _gluon_bwd(variant, slices, seqlen, (scale,))
        record("ffa", variant, json.dumps({"gluon": GLUON_BWD_VARIANTS[variant]}), "bwd",
               lambda: call(do, q, k, v, ref_out, ref_lse))
    q = k = v = do = ref_out = ref_lse = None  # free the inputs before the peers allocate theirs
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    for peer in args.peers:
        time_peer(peer, mask, seqlen, args, base, flops, writer)


def time_peer(peer, mask, seqlen, args, base, flops, writer):
    from bench.kernels import Shapes, load_adapter, make_inputs

    shapes = Shapes(batch=1, seqlen=seqlen, num_heads_q=args.num_heads_q,
                    num_heads_kv=args.num_heads_kv, head_dim=args.head_dim, dtype="bfloat16")
    device = torch.device(DEVICE)
    try:
        adapter = load_adapter(peer)
        reason = adapter.supports(mask, shapes, device)
    except Exception as e:  # noqa: BLE001 - ImportError and friends: the peer is absent
        reason = f"{type(e).__name__}: {e}"
    if reason is not None:
        for direction in ("fwd", "bwd"):
            writer.row(**base, kernel=peer, variant=peer, direction=direction, flops=flops[direction],
                       status="unsupported", message=str(reason)[:300])
        return
    try:
        prepared = adapter.prepare(mask, shapes, device, make_inputs(shapes, device))
    except Exception as e:  # noqa: BLE001
        for direction in ("fwd", "bwd"):
            writer.row(**base, kernel=peer, variant=peer, direction=direction, flops=flops[direction],
                       status="error", message=f"prepare: {type(e).__name__}: {str(e)[:300]}")
        return
    for direction, fn in (("fwd", prepared.fwd), ("bwd", prepared.bwd)):
        try:
            ms = time_ms(fn, args.budget_ms)
            writer.row(**base, kernel=peer, variant=peer, direction=direction, flops=flops[direction],
                       runtime_ms=ms, tflops_per_s=flops[direction] / (ms * 1e-3) / 1e12, status="ok")
        except Exception as e:  # noqa: BLE001
            writer.row(**base, kernel=peer, variant=peer, direction=direction, flops=flops[direction],
                       status="error", message=f"{type(e).__name__}: {str(e)[:300]}")
    del prepared
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def summary(rows) -> str:
    """Best Triton variant per (S, mask, direction) and its ratio to each peer."""
    cells = {}
    probes = {n for n, (mode, *_) in GLUON_BWD_VARIANTS.items() if mode in ("none", "noadd")}
    for r in rows:
        if r["status"] != "ok" or r["variant"] in probes:  # timing bounds, not a backward
            continue
        cell = cells.setdefault((r["seqlen"], r["mask"], r["direction"]), {})
        key = "ffa" if r["kernel"] == "ffa" else r["kernel"]
        if key not in cell or r["tflops_per_s"] > cell[key][0]:
            cell[key] = (r["tflops_per_s"], r["variant"])
    lines = ["| S | mask | dir | best ffa variant | ffa TFLOPs/s | fa4 | flex | ffa/fa4 | ffa/flex |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (s, m, dr), cell in sorted(cells.items(), key=lambda x: (x[0][0], MASKS.index(x[0][1]) if x[0][1] in MASKS else 99, x[0][2])):
        f = cell.get("ffa", (None, "-"))
        get = lambda p: cell[p][0] if p in cell else None
        fmt = lambda x: f"{x:.0f}" if x else "-"
        ratio = lambda p: f"{f[0] / get(p):.2f}" if f[0] and get(p) else "-"
        lines.append(f"| {s} | {m} | {dr} | {f[1]} | {fmt(f[0])} | {fmt(get('fa4'))} | "
                     f"{fmt(get('flex'))} | {ratio('fa4')} | {ratio('flex')} |")
    per_variant = {}
    for r in rows:
        if r["status"] == "ok" and r["kernel"] == "ffa":
            per_variant.setdefault((r["seqlen"], r["mask"], r["direction"]), []).append(
                f"{r['variant'].split('_', 1)[-1]}={r['tflops_per_s']:.0f}")
    lines.append("\nper variant (TFLOPs/s):")
    for key, vals in sorted(per_variant.items()):
        lines.append(f"{key[0]} {key[1]} {key[2]}: " + " ".join(vals))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384, 65536])
    p.add_argument("--masks", nargs="+", default=list(MASKS))
    p.add_argument("--variants", nargs="*", default=None, help="substrings; default: all variants")
    p.add_argument("--peers", nargs="*", default=["fa4", "flex"])
    p.add_argument("--num-heads-q", type=int, default=64)
    p.add_argument("--num-heads-kv", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--budget-ms", type=float, default=150.0, help="timed calls per measurement")
    p.add_argument("--timing", choices=("synced", "queued"), default="synced",
                   help="synced: a synchronize after each timed call; queued: as the bench times")
    p.add_argument("--deadline-s", type=float, default=470.0,
                   help="no new cell after this many seconds (a 600 s device call leaves one cell and the table)")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--check-seqlen", type=int, default=CHECK_SEQLEN)
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    p.add_argument("--check-child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--progress", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    global DEVICE, TIMING
    DEVICE, TIMING = args.device, args.timing
    if DEVICE == "cpu":  # the dry run: Triton's interpreter, with this project's shims
        os.environ["TRITON_INTERPRET"] = "1"
        from magi_attention.testing.triton_interpreter import patch
        patch()
    if args.check_child is not None:
        check_variants(args.check_child.split(","), args.progress, args.head_dim, args.check_seqlen)
        return
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    import triton
    names = [n for n in (*FWD_VARIANTS, *BWD_VARIANTS, *GLUON_BWD_VARIANTS)
             if args.variants is None or any(s in n for s in args.variants)]
    if args.skip_check:
        passing = names
    else:
        checks = run_checks(names, args.out, args.head_dim, args.check_seqlen)
        for n in names:
            print(f"check {n:<32} {checks[n]['status']:<6} {checks[n].get('message', '')[:200]}", flush=True)
        passing = [n for n in names if checks[n]["status"] == "ok"]
        print(f"checks done in {time.time() - t0:.0f} s; timing {len(passing)}/{len(names)} variants",
              flush=True)
    meta = dict(git_sha=_git_sha(), gpu_name=torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE,
                torch_version=torch.__version__, triton_version=triton.__version__, timing=TIMING)
    writer = Writer(os.path.join(args.out, "sweep.csv"), meta)
    # the FA4 cells of the issue first (full, causal at every S), then the other masks
    first = [(s, m) for s in args.seqlens for m in args.masks if m in ("full", "causal")]
    cells = first + [(s, m) for s in args.seqlens for m in args.masks if (s, m) not in first]
    for seqlen, name in cells:
        if time.time() - t0 > args.deadline_s:
            print(f"deadline {args.deadline_s:.0f} s reached: skipping S={seqlen} {name}", flush=True)
            continue
        time_cell(name, seqlen, args, passing, writer)
    table = summary(writer.rows)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table + "\n")
    print(f"\nsweep done in {time.time() - t0:.0f} s\n{table}", flush=True)


if __name__ == "__main__":
    main()
