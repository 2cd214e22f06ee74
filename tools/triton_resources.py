"""Registers, spills, shared memory and programs per SM of the library's Triton and Gluon FFA
kernels on sm90, found without a GPU.

The launchers run on CPU tensors while Triton compiles for an sm_90a target and launches nothing
(a compile-only driver); the ptxas that ships with Triton then reports each kernel's resources.
This is what a configuration costs before any device time is spent: a change that makes a kernel
spill, or leaves one program per SM where a config relies on two, shows here. ``--ptx-dir``
also writes each kernel's PTX, to compare the code two checkouts generate (diff the folders).

    python tools/triton_resources.py                            # every configuration
    python tools/triton_resources.py --only gluon_fwd --out /tmp/resources.csv
    python tools/triton_resources.py --only triton_fwd_d128 --ptx-dir /tmp/ptx

Configurations (``CONFIGS``): the Triton forward at its default, short-row and PackGQA configs
and the ordered Triton backward (head_dim 64, 128, 256), the Gluon forward (short rows, long
rows, tiles cut at the slices, the dynamic grid, an Arrival) and the Gluon backward (row table,
row intervals by TMA, head chunks, bitmaps, cut tiles) at head_dim 64 and 128; GQA 8:2, bf16.
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
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's magi_attention first

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.testing.masks import causal_document, named_mask  # noqa: E402

SM90 = GPUTarget("cuda", 90, 32)
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
# Hopper per SM: 64K 32-bit registers, 228 KB shared memory (227 KB usable by one block)
REGS_PER_SM, SMEM_PER_SM = 65536, 233472
COLUMNS = ["config", "kernel", "num_warps", "num_stages", "registers", "spill_stores",
           "spill_loads", "shared_kb", "programs_per_sm", "git_sha", "triton_version", "error"]
HEADS = (8, 2)  # q heads, kv heads


class CompileOnlyDriver:
    """Just enough of a Triton driver for JITFunction.run to compile for sm90 on a CPU."""

    def get_current_target(self):
        return SM90

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


class CompileRecorder:
    """While active, every Triton kernel launch compiles (sm90) and is recorded, not run:
    ``compiled`` holds (kernel function name, compiled kernel) in launch order."""

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
    """Registers, spill bytes, shared memory and programs per SM of one compiled kernel
    (ptxas -v on its PTX)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(kernel.asm["ptx"])
    try:
        out = subprocess.run([str(BIN / "ptxas"), "-v", "-arch=sm_90a", f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True).stderr
    finally:
        os.unlink(f.name)
    regs = int(_PTXAS_USED.search(out).group(1))
    stores, loads = (int(x) for x in _PTXAS_SPILL.search(out).groups())
    meta = kernel.metadata
    by_regs = REGS_PER_SM // (regs * meta.num_warps * 32)
    by_smem = SMEM_PER_SM // meta.shared if meta.shared else by_regs
    return {"num_warps": meta.num_warps, "num_stages": meta.num_stages, "registers": regs,
            "spill_stores": stores, "spill_loads": loads,
            "shared_kb": round(meta.shared / 1024, 1), "programs_per_sm": min(by_regs, by_smem)}


def sass(kernel) -> str:
    """The SASS of a compiled kernel (ptxas and nvdisasm shipped with Triton)."""
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        ptx.write_text(kernel.asm["ptx"])
        subprocess.run([str(BIN / "ptxas"), "-arch=sm_90a", str(ptx), "-o", str(cubin)],
                       check=True)
        return subprocess.run([str(BIN / "nvdisasm"), "-c", str(cubin)], capture_output=True,
                              text=True, check=True).stdout


def inputs(seqlen: int, head_dim: int, heads: tuple[int, int] = HEADS):
    """(q, k, v, dout) bf16 on the CPU: their shapes and dtypes are all a compile sees."""
    make = lambda h: torch.zeros(seqlen, h, head_dim, dtype=torch.bfloat16)  # noqa: E731
    return make(heads[0]), make(heads[1]), make(heads[1]), make(heads[0])


def _triton_fwd(head_dim: int, variant: str):
    """The Triton forward at ``variant`` ("default", "short_rows", "pack_gqa") of fwd_config."""
    from magi_attention.kernels.triton.configs import fwd_config, pack_config
    from magi_attention.kernels.triton.forward import launch_fwd
    seqlen = 1024
    config = {"default": lambda: fwd_config(head_dim),
              "short_rows": lambda: fwd_config(head_dim, 1.0),
              "pack_gqa": lambda: pack_config(head_dim, HEADS[0] // HEADS[1])}[variant]()
    q, k, v, _ = inputs(seqlen, head_dim)
    block_m = config.block_m // (HEADS[0] // HEADS[1]) if config.pack_gqa else config.block_m
    plan = plan_block_sparse(named_mask("causal", seqlen), seqlen, seqlen, block_m,
                             config.block_n)
    launch_fwd(q, k, v, plan, config, head_dim ** -0.5, 0.0, False)


def _triton_bwd(head_dim: int):
    """The ordered Triton backward (preprocess, dk/dv, dq) at bwd_config."""
    from magi_attention.kernels.triton.backward import launch_bwd
    from magi_attention.kernels.triton.configs import bwd_config
    seqlen, config = 1024, bwd_config(head_dim)
    q, k, v, dout = inputs(seqlen, head_dim)
    slices = named_mask("causal", seqlen)
    plan_kv = plan_block_sparse(slices, seqlen, seqlen, config.block_m1, config.block_n1)
    plan_q = plan_block_sparse(slices, seqlen, seqlen, config.block_m2, config.block_n2)
    launch_bwd(dout, q, k, v, q, torch.zeros(seqlen, HEADS[0]), plan_kv, plan_q, config,
               head_dim ** -0.5, 0.0)


def _gluon_fwd(head_dim: int, variant: str):
    """The Gluon forward: "short_rows" (causal 2048, the plain PV wait, mask loads hoisted and
    the next item prefetched), "long_rows" (full 8192, the softmax under the PV), "cut" (causal
    documents cut at the slices), "dynamic" (the counter-fed grid) or "arrival"."""
    from magi_attention.kernels.triton import gluon_forward as gf
    seqlen = {"long_rows": 8192, "cut": 1531}.get(variant, 2048)
    slices = {"long_rows": named_mask("full", seqlen),
              "cut": causal_document([700, 831])}.get(variant, named_mask("causal", seqlen))
    q, k, v, _ = inputs(seqlen, head_dim)
    plan = plan_block_sparse(slices, seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N,
                             cut_at_slices=variant == "cut")
    arrival = None
    if variant == "arrival":
        late = gf.late_tiles(plan.num_k_tiles, plan.block_n, [(seqlen // 2, seqlen)])
        order, n_first = gf.arrival_order(plan, late)
        arrival = gf.Arrival(torch.zeros(1, dtype=torch.int32), torch.from_numpy(late),
                             torch.from_numpy(order), n_first)
    gf.launch_fwd(q, k, v, plan, head_dim ** -0.5, dynamic=variant == "dynamic",
                  arrival=arrival)


def _gluon_bwd(head_dim: int, variant: str):
    """The Gluon backward: "table" (causal, partial tiles from the row table in global memory),
    "row_tma" (their one interval a row by TMA), "head_chunks" (two programs a kv head),
    "bits" (qk_sparse's several intervals a row from bitmaps) or "cut" (causal documents cut at
    the slices)."""
    from magi_attention.kernels.block_sparse import slice_bounds_array, union_row_intervals
    from magi_attention.kernels.triton import gluon_backward as gb
    seqlen = 2048
    slices = {"bits": named_mask("qk_sparse", seqlen),
              "cut": causal_document([700, 831, 517])}.get(variant, named_mask("causal", seqlen))
    plan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N,
                             cut_at_slices=variant == "cut")
    q, k, v, dout = inputs(seqlen, head_dim)
    bits = None
    if variant == "bits":
        bits = gb.key_tile_bits(plan, union_row_intervals(slice_bounds_array(slices), seqlen))
    gb.launch_bwd(dout, q, k, v, q, torch.zeros(seqlen, HEADS[0]), plan, head_dim ** -0.5,
                  row_tma=variant == "row_tma", head_chunks=2 if variant == "head_chunks" else 1,
                  bits=bits)


def _configs() -> dict[str, Callable[[], None]]:
    configs = {}
    for d in (64, 128, 256):
        for variant in ("default", "short_rows", "pack_gqa"):
            if variant == "default" or d <= 128:  # d256 runs configs.FWD_WIDE alone
                configs[f"triton_fwd_d{d}_{variant}"] = (
                    lambda d=d, variant=variant: _triton_fwd(d, variant))
        configs[f"triton_bwd_d{d}"] = lambda d=d: _triton_bwd(d)
    for d in (64, 128):
        for variant in ("short_rows", "long_rows", "cut", "dynamic", "arrival"):
            configs[f"gluon_fwd_d{d}_{variant}"] = (
                lambda d=d, variant=variant: _gluon_fwd(d, variant))
        for variant in ("table", "row_tma", "head_chunks", "bits", "cut"):
            configs[f"gluon_bwd_d{d}_{variant}"] = (
                lambda d=d, variant=variant: _gluon_bwd(d, variant))
    return configs


CONFIGS = _configs()


def compile_config(name: str) -> list[tuple[str, object]]:
    """(kernel name, compiled kernel) of every launch configuration ``name`` makes."""
    with CompileRecorder() as rec:
        CONFIGS[name]()
    return rec.compiled


def config_rows(name: str, ptx_dir: Path | None = None) -> list[dict]:
    """One row per kernel configuration ``name`` launches (a row with the error where it does
    not compile); ``ptx_dir``: also each kernel's PTX as ``<config>__<i>_<kernel>.ptx``."""
    try:
        compiled = compile_config(name)
    except Exception as e:  # noqa: BLE001 - a configuration that does not compile is a result
        return [{"config": name, "error": f"{type(e).__name__}: {str(e)[:200]}"}]
    if ptx_dir is not None:
        ptx_dir.mkdir(parents=True, exist_ok=True)
        for i, (kernel_name, kernel) in enumerate(compiled):
            (ptx_dir / f"{name}__{i}_{kernel_name}.ptx").write_text(kernel.asm["ptx"])
    return [{"config": name, "kernel": kernel_name, **resources(kernel)}
            for kernel_name, kernel in compiled]


def _git_sha() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _line(cells) -> str:
    widths = (30, 22)
    return " ".join(f"{c!s:<{widths[i]}}" if i < 2 else f"{c!s:>14}" for i, c in enumerate(cells))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None,
                   help="substrings of the configuration names; default: all")
    p.add_argument("--out", default=None, help="CSV file for the rows")
    p.add_argument("--ptx-dir", default=None, help="folder for each kernel's PTX")
    args = p.parse_args(argv)
    names = [n for n in CONFIGS if not args.only or any(s in n for s in args.only)]
    if not names:
        raise SystemExit(f"--only {args.only} matches no configuration of {list(CONFIGS)}")
    stamp = {"git_sha": _git_sha(), "triton_version": triton.__version__}
    shown = COLUMNS[:-3]
    print(_line(shown))
    ptx_dir = Path(args.ptx_dir) if args.ptx_dir else None
    with open(args.out, "w", newline="") if args.out else contextlib.nullcontext() as out:
        writer = csv.DictWriter(out, COLUMNS) if out else None
        if writer:
            writer.writeheader()
        for name in names:
            rows = config_rows(name, ptx_dir)
            for row in rows:
                print(_line(row.get(c, "") for c in shown) if "error" not in row
                      else f"{name:<30} error: {row['error']}", flush=True)
            if writer:
                writer.writerows({**row, **stamp} for row in rows)
                out.flush()


if __name__ == "__main__":
    main()
