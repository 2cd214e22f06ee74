"""Host time per call of each kernel adapter at short sequences, where it can exceed the kernel.

At 1k the kernel sweep times FFA's Triton forward at ~100 TFLOPs/s on full (337 us per call for
a kernel that runs ~550 TFLOPs/s at 4k) and ffa_fa4 / fa4 far below cuDNN and FlashInfer: the
timed loop then measures the host's launch path, not the GPU (notes/host_overhead.md). Per cell
this records, for the benchmark's own prepared calls (the adapters' fwd and bwd):
  host_us    launch loop timed while a sleep kernel holds the GPU (every call only queues)
  device_us  the benchmark's CUDA-event median (as in the sweep's rows)
and, for the FFA adapters, a cProfile of the launch loop (top functions by own time) in the log.

    python scripts/device/host_overhead.py --out $OUT [--seqlens 1024 2048] [--kernels ffa fa4]
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.kernels import load_adapter  # noqa: E402
from bench.metrics import host_profile, host_us_per_call, time_cuda_ms  # noqa: E402
from bench.problem import Shapes, make_inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402

# ffa_ptr: FFA's Triton forward with pointer loads instead of TMA descriptors (fwd only)
KERNELS = ("ffa", "ffa_ptr", "ffa_fa4", "fa4", "flex", "cudnn", "flashinfer")
MASKS = ("full", "causal_document")
PROFILED = ("ffa", "ffa_ptr", "ffa_fa4")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seqlens", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS))
    parser.add_argument("--masks", nargs="+", default=list(MASKS))
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--heads", type=int, nargs=2, default=(64, 8), metavar=("HQ", "HKV"))
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = "bfloat16" if device.type == "cuda" else "float32"
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "host_overhead.csv"
    fields = ["kernel", "mask", "seqlen", "direction", "host_us", "device_us", "status", "message"]
    with path.open("w", newline="") as f:
        csv.DictWriter(f, fields).writeheader()
    log = (args.out / "host_overhead_profiles.txt").open("w")
    for seqlen in args.seqlens:
        shapes = Shapes(batch=1, seqlen=seqlen, num_heads_q=args.heads[0],
                        num_heads_kv=args.heads[1], head_dim=128, dtype=dtype)
        inputs = make_inputs(shapes, device)
        for mask_name in args.masks:
            mask = cell_mask(MaskChoice(label=mask_name, name=mask_name), seqlen, DataConfig(),
                             num_heads_kv=args.heads[1])
            for kernel in args.kernels:
                rows = _measure(kernel, mask, shapes, device, inputs, args.calls, log)
                with path.open("a", newline="") as f:
                    csv.DictWriter(f, fields).writerows(
                        dict(kernel=kernel, mask=mask_name, seqlen=seqlen, **r) for r in rows)
                for r in rows:
                    print(f"{kernel:>10} {mask_name:>16} {seqlen:>6} {r['direction']} "
                          f"host {r['host_us']} us device {r['device_us']} us {r['status']}",
                          flush=True)
    log.close()


def _pointer_loads_prepared(mask, shapes, device, inputs):
    """FFA's Triton forward called directly (no autograd, no validation) with pointer loads
    instead of tensor descriptors (TMA): what do the descriptors and the wrapper cost per call?"""
    import dataclasses
    from types import SimpleNamespace

    from bench.masks import convert
    from magi_attention.functional import FlexAttnPlan
    from magi_attention.kernels import triton as tk
    from magi_attention.kernels.triton.configs import fwd_config

    config = dataclasses.replace(fwd_config(shapes.head_dim), use_tma=False)
    q, k, v = (t.detach().reshape(-1, *t.shape[2:]).contiguous()
               for t in (inputs.q, inputs.k, inputs.v))
    qr, kr, ty = convert.to_slices_tensors(mask, device=device)
    plan = FlexAttnPlan.from_tensors(qr, kr, ty, shapes.seqlen, shapes.seqlen)
    return SimpleNamespace(fwd=lambda: tk.fwd(q, k, v, plan, shapes.softmax_scale, config=config))


def _measure(kernel, mask, shapes, device, inputs, calls, log) -> list[dict]:
    try:
        if kernel == "ffa_ptr":
            prepared = _pointer_loads_prepared(mask, shapes, device, inputs)
            return _time_directions(kernel, prepared, mask, shapes, calls, log, ("fwd",))
        adapter = load_adapter(kernel)
        reason = adapter.supports(mask, shapes, device)
        if reason:
            return [_row(d, status="unsupported", message=reason) for d in ("fwd", "bwd")]
        prepared = adapter.prepare(mask, shapes, device, inputs)
    except Exception as e:  # a peer that is not installed or fails: a row, not a crash
        return [_row(d, status="error", message=f"{type(e).__name__}: {e}"[:300])
                for d in ("fwd", "bwd")]
    return _time_directions(kernel, prepared, mask, shapes, calls, log, ("fwd", "bwd"))


def _time_directions(kernel, prepared, mask, shapes, calls, log, directions) -> list[dict]:
    rows = []
    for direction in directions:
        fn = prepared.fwd if direction == "fwd" else prepared.bwd
        try:
            fn()  # compiles; the bwd builds its forward graph once
            device_us = time_cuda_ms(fn, warmup=3, repeat=10) * 1e3
            rows.append(_row(direction, host_us=f"{host_us_per_call(fn, calls):.1f}",
                             device_us=f"{device_us:.1f}", status="ok"))
            if kernel in PROFILED and shapes.seqlen == 1024:
                log.write(f"==== {kernel} {mask.name} S={shapes.seqlen} {direction}\n")
                log.write(host_profile(fn, calls))
                log.flush()
        except Exception as e:
            rows.append(_row(direction, status="error", message=f"{type(e).__name__}: {e}"[:300]))
    return rows


def _row(direction: str, host_us: str = "", device_us: str = "", status: str = "ok",
         message: str = "") -> dict:
    return dict(direction=direction, host_us=host_us, device_us=device_us, status=status,
                message=message)


if __name__ == "__main__":
    main()
