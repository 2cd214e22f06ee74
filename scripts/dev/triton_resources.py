"""Registers, spills and shared memory of the Triton FFA kernels on sm90, found without a GPU.

The launch functions run on CPU tensors while Triton compiles for an sm_90a target and launches
nothing (a compile-only driver); the ptxas that ships with Triton then reports each kernel's
resources. This is what a tile config costs before any device time is spent: a variant that
spills, or whose registers or shared memory allow one program per SM, can be struck off here.

    python scripts/dev/triton_resources.py                       # every sweep variant, two masks
    python scripts/dev/triton_resources.py --variants bwd_det --masks full --out /tmp/res.csv

The variants are those of scripts/dev/ffa_triton_sweep.py (GQA 64:8, head_dim 128, bf16).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # this checkout's packages first
sys.path.insert(0, HERE)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import ffa_triton_sweep  # noqa: E402
from ffa_triton_sweep import BWD_VARIANTS, FWD_VARIANTS, _mask, _plans  # noqa: E402

ffa_triton_sweep.DEVICE = "cpu"  # where _plans puts the plans' tensors: nothing runs here

SM90 = GPUTarget("cuda", 90, 32)
PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
# Hopper per SM: 64K 32-bit registers, 228 KB shared memory (227 KB usable by one block)
REGS_PER_SM, SMEM_PER_SM = 65536, 233472
COLUMNS = ["variant", "mask", "kernel", "num_warps", "num_stages", "registers", "spill_stores",
           "spill_loads", "shared_kb", "programs_per_sm", "git_sha", "triton_version", "error"]


class CompileOnlyDriver:
    """Just enough of a Triton driver for JITFunction.run to compile for sm90 on a CPU."""

    def get_current_target(self):
        return SM90

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


class CompileRecorder:
    """While active, every Triton kernel launch compiles (sm90) and is recorded, not run."""

    def __init__(self):
        self.compiled: list[tuple[str, object]] = []
        self._run = self._driver = None

    def __enter__(self):
        self._run = JITFunction.run
        self._driver = triton.runtime.driver._active  # None on a machine without a GPU
        recorder = self

        def compile_only(fn, *args, grid, warmup, **kwargs):
            kernel = recorder._run(fn, *args, grid=grid, warmup=True, **kwargs)
            recorder.compiled.append((fn.fn.__name__, kernel))
            return kernel

        JITFunction.run = compile_only
        triton.runtime.driver.set_active(CompileOnlyDriver())
        return self

    def __exit__(self, *exc):
        JITFunction.run = self._run
        triton.runtime.driver.set_active(self._driver)


_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def resources(kernel) -> dict:
    """registers, spill bytes and shared memory of one compiled kernel (ptxas -v on its PTX)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(kernel.asm["ptx"])
    try:
        out = subprocess.run([PTXAS, "-v", "-arch=sm_90a", f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)
    regs = int(_PTXAS_USED.search(out).group(1))
    stores, loads = (int(x) for x in _PTXAS_SPILL.search(out).groups())
    meta = kernel.metadata
    threads = meta.num_warps * 32
    by_regs = REGS_PER_SM // (regs * threads)
    by_smem = SMEM_PER_SM // meta.shared if meta.shared else by_regs
    return {"num_warps": meta.num_warps, "num_stages": meta.num_stages, "registers": regs,
            "spill_stores": stores, "spill_loads": loads, "shared_kb": round(meta.shared / 1024, 1),
            "programs_per_sm": min(by_regs, by_smem)}


def _inputs(seqlen, hq=64, hk=8, d=128):
    mk = lambda h: torch.randn(seqlen, h, d).to(torch.bfloat16)  # noqa: E731
    return mk(hq), mk(hk), mk(hk), mk(hq)


def variant_rows(variant: str, mask_name: str, seqlen: int) -> list[dict]:
    """One row per kernel the variant launches on ``mask_name``."""
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.forward import launch_fwd

    slices = list(_mask(mask_name, seqlen).slices)
    q, k, v, do = _inputs(seqlen)
    scale = q.shape[-1] ** -0.5
    with CompileRecorder() as rec:
        if variant in FWD_VARIANTS:
            cfg = FWD_VARIANTS[variant]
            launch_fwd(q, k, v, _plans(slices, seqlen, fcfg=cfg), cfg, scale, 0.0, False)
        else:
            cfg, det = BWD_VARIANTS[variant]
            plan_kv, plan_q = _plans(slices, seqlen, bcfg=cfg, deterministic=det)
            lse = torch.zeros(seqlen, q.shape[1])
            launch_bwd(do, q, k, v, q, lse, plan_kv, plan_q, cfg, scale, 0.0, deterministic=det)
    return [{"variant": variant, "mask": mask_name, "kernel": name, **resources(kernel)}
            for name, kernel in rec.compiled]


def _line(cells) -> str:
    """A printed table line: variant, mask, kernel left-aligned, the numbers right-aligned."""
    widths = (36, 22, 22)
    return " ".join(f"{c!s:<{widths[i]}}" if i < 3 else f"{c!s:>14}" for i, c in enumerate(cells))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="*", default=None, help="substrings; default: all")
    p.add_argument("--masks", nargs="+", default=["full", "causal_document"])
    p.add_argument("--seqlen", type=int, default=2048, help="any multiple of the tiles compiles alike")
    p.add_argument("--out", default=None, help="CSV file for the rows")
    args = p.parse_args(argv)
    names = [n for n in (*FWD_VARIANTS, *BWD_VARIANTS)
             if not args.variants or any(s in n for s in args.variants)]
    from bench.provenance import current
    stamp = {"git_sha": current().label, "triton_version": triton.__version__}
    shown = COLUMNS[:-3]
    print(_line(shown))
    with open(args.out, "w", newline="") if args.out else contextlib.nullcontext() as out:
        writer = csv.DictWriter(out, COLUMNS) if out else None
        if writer:
            writer.writeheader()
        for variant in names:
            for mask_name in args.masks:
                try:
                    rows = variant_rows(variant, mask_name, args.seqlen)
                except Exception as e:  # noqa: BLE001 - a variant that does not compile is a result
                    rows = [{"variant": variant, "mask": mask_name,
                             "error": f"{type(e).__name__}: {str(e)[:200]}"}]
                    print(f"{variant:<36} {mask_name:<22} error: {rows[0]['error']}")
                else:
                    for row in rows:
                        print(_line(row[c] for c in shown), flush=True)
                if writer:
                    writer.writerows({**row, **stamp} for row in rows)
                    out.flush()


if __name__ == "__main__":
    main()
