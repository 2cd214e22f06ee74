"""A torch.profiler timeline (chrome trace, gzipped) of MagiAttention's calc_attn forward and
backward at cp 2 on one mask, every rank: what runs on which stream, and when, inside the
forward's fused path (the cast, the own KV's copies, the kernel) and the backward's.

    torchrun --nproc-per-node 2 scripts/dev/magi_trace.py --out $OUT [--mask causal_document] \
        [--on dynamic_grid=0 ...]

``--on NAME`` sets the runtime attribute NAME to True before the first call, ``--on NAME=N`` to
the integer N (dynamic_grid=0: the strided grid); the trace's file name lists them.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.append(str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.cp.local_kernel import LocalKernel  # noqa: E402
from bench.cp.magi import MagiAttention  # noqa: E402
from bench.cp.runner import default_cuda_connections  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402

HQ, HKV, D = 64, 8, 128


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mask", default="causal_document")
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--backend", default="triton")
    p.add_argument("--on", action="append", default=[], help="a runtime switch to turn on")
    args = p.parse_args()
    default_cuda_connections()  # the queue count bench.cp runs under (before CUDA starts)
    rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    world = dist.get_world_size()
    seqlen = args.seqlen_per_gpu * world
    mask = cell_mask(MaskChoice(label=args.mask, name=args.mask, params={}), seqlen, DataConfig(),
                     HKV)
    strategy = MagiAttention(mask, None, num_heads_q=HQ, num_heads_kv=HKV,
                             kernel=LocalKernel(args.backend), balance="timed")
    for switch in args.on:
        name, _, value = switch.partition("=")
        if not hasattr(strategy.key.runtime, name):
            raise SystemExit(f"--on {name}: the runtime has no such switch")
        setattr(strategy.key.runtime, name, int(value) if value else True)
    g = torch.Generator(device="cuda").manual_seed(0)
    make = lambda h: torch.randn(seqlen, h, D, device="cuda", generator=g).bfloat16()  # noqa: E731
    q, k, v, dout = (strategy.shard(make(h)) for h in (HQ, HKV, HKV, HQ))
    q, k, v = (t.requires_grad_() for t in (q, k, v))

    def fwd():
        with torch.no_grad():
            strategy.attention(q, k, v)

    out = strategy.attention(q, k, v)

    def bwd():
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    for _ in range(10):
        fwd()
        bwd()
    torch.cuda.synchronize()
    dist.barrier()
    from torch.profiler import ProfilerActivity, profile, schedule
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "".join(f"_{n.replace('=', '')}" for n in args.on)
    raw = args.out / f"trace_{args.mask}_{args.backend}{tag}_rank{rank}.json"
    # one step traced and thrown away first: the profiler's own start-up made the first traced
    # calls host-bound (session 44: launches hundreds of us apart), which hid the prologue
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(raw))) as prof:
        for _ in range(2):
            for _ in range(3):
                fwd()
            for _ in range(2):
                bwd()
            torch.cuda.synchronize()
            prof.step()
    with raw.open("rb") as src, gzip.open(f"{raw}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    print(f"rank {rank}: {strategy.notes}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
