"""Where MagiAttention's time goes at cp 1 on one GPU: calc_attn against the local kernel alone.

For each mask: the FFA kernel through flex_flash_attn_func (range tensors on the GPU, as a user
passes them) and calc_attn on a one-rank group, fwd and bwd, timed the same way (median of CUDA
event timings), plus a torch.profiler table of calc_attn fwd+bwd (host ops, syncs, kernels) and
the number of device-to-host copies / synchronisations it made. Runs on whichever
magi_attention is first on PYTHONPATH, so the same script profiles an older checkout.

    python tools/device/magi_profile.py --out $OUT --tag after
    PYTHONPATH=.old python tools/device/magi_profile.py --out $OUT --tag before
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.append(str(Path(__file__).resolve().parents[2]))  # after an explicit PYTHONPATH

from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import build_mask, convert  # noqa: E402
from bench.metrics import attn_flops, time_cuda_ms, tflops_per_s  # noqa: E402
import magi_attention  # noqa: E402
from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key  # noqa: E402
from magi_attention.functional import flex_flash_attn_func  # noqa: E402

FIELDS = ("tag", "impl", "backend", "mask", "seqlen", "direction", "runtime_ms", "tflops",
          "syncs_per_step", "code")
# blocking calls only, by exact name: cudaMemcpyAsync (a device-to-device copy_) does not wait
SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "aten::item",
               "aten::_local_scalar_dense")


def _timed(fn_fwd, fn_bwd_setup, warmup, repeat):
    with torch.no_grad():
        fwd_ms = time_cuda_ms(fn_fwd, warmup, repeat)
    bwd = fn_bwd_setup()
    bwd_ms = time_cuda_ms(bwd, warmup, repeat)
    return fwd_ms, bwd_ms


def _autograd_bwd(attn, q, k, v):
    def setup():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out = attn(*leaves)
        dout = torch.randn_like(out)
        return lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)
    return setup


def profile_steps(step, path: Path) -> int:
    """Writes the profiler tables of three calls of ``step`` (after one untimed) to ``path``;
    returns the device-to-host syncs per call."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    path.write_text(events.table(sort_by="self_cpu_time_total", row_limit=40) + "\n\n"
                    + events.table(sort_by="self_cuda_time_total", row_limit=25))
    syncs = sum(e.count for e in events if e.key in SYNC_EVENTS)
    return max(0, syncs - 1) // 3  # less the one synchronize above that closes the calls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tag", default="after")
    p.add_argument("--seqlen", type=int, default=16384)
    p.add_argument("--masks", nargs="+",
                   default=["causal_document", "full_document", "block_causal_document"])
    p.add_argument("--backends", nargs="+", default=["fa4", "triton"])
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29611")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    code = getattr(magi_attention, "__file__", "?")
    csv_path = args.out / f"magi_profile_{args.tag}.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        hq, hk, d, s = 64, 8, 128, args.seqlen
        for name in args.masks:
            mask = build_mask(name, s, doc_lens=sample_doc_lens(s, seed=0))
            qr, kr, ty = convert.to_slices_tensors(mask, "cuda")
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(s, h, d, device="cuda", generator=g).bfloat16()
                       for h in (hq, hk, hk))
            for backend in args.backends:
                try:
                    def kernel(q_, k_, v_):
                        return flex_flash_attn_func(q_, k_, v_, qr, kr, ty, backend=backend)[0]
                    key = magi_attn_flex_key(*convert.to_slices_tensors(mask, "cpu"), s, hq, hk, d,
                                             None, chunk_size=512, backend=backend)
                    ql, kl, vl = (dispatch(t, key) for t in (q, k, v))

                    def magi(q_, k_, v_):
                        return calc_attn(q_, k_, v_, key)[0]
                    rows = []
                    for impl, attn, tensors in (("kernel", kernel, (q, k, v)),
                                                ("magi_cp1", magi, (ql, kl, vl))):
                        fwd_ms, bwd_ms = _timed(lambda: attn(*tensors),
                                                _autograd_bwd(attn, *tensors),
                                                args.warmup, args.repeat)
                        syncs = ""
                        if impl == "magi_cp1":
                            leaves = [t.detach().requires_grad_() for t in tensors]

                            def step():
                                out = attn(*leaves)
                                torch.autograd.grad(out, leaves, torch.ones_like(out))
                            syncs = profile_steps(step, args.out / f"prof_{args.tag}_{name}_{backend}.txt")
                        for direction, ms in (("fwd", fwd_ms), ("bwd", bwd_ms)):
                            flops = attn_flops(mask.area, hq, d, direction=direction)
                            rows.append(dict(tag=args.tag, impl=impl, backend=backend, mask=name,
                                             seqlen=s, direction=direction,
                                             runtime_ms=f"{ms:.4f}",
                                             tflops=f"{tflops_per_s(flops, ms):.1f}",
                                             syncs_per_step=syncs, code=code))
                except Exception as e:  # one failing backend must not lose the others
                    rows = [dict(tag=args.tag, impl="error", backend=backend, mask=name, seqlen=s,
                                 direction="", runtime_ms="", tflops="", syncs_per_step="",
                                 code=f"{type(e).__name__}: {e}"[:300])]
                for row in rows:
                    writer.writerow(row)
                    print(row, flush=True)
                f.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
