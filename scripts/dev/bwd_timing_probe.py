"""Why does the timed cut (magi_attention.api._tune_cut) see a slower backward than the CP
benchmark? On 2 H200s (session 30, Triton, causal, 64k tokens a GPU) the timing's whole
backward took 748 ms where the benchmark measured 651 ms for the same key, and it saw the cut
backward 1.6% faster where the benchmark measured 5% (cut=both against cut=auto, two runs).
This times one key's backward, whole and cut, every way the two time it, on the same inputs:

  bench_events    torch.autograd.grad through calc_attn (retain_graph), CUDA events, median
                  (bench.metrics.time_cuda_ms: what the CP rows report)
  bench_wall      the same calls, wall clock around a device sync, mean
  runtime_events  DistAttnRuntime.backward called directly (as the tuner does), CUDA events
  runtime_wall    the same, wall clock around a device sync, mean
  tuner_clock     the tuner's own _Clock (barrier, wall clock, the slowest rank's mean)
  tuner_inputs    runtime_events on the tuner's inputs (randn drawn per rank in bf16, its
                  own forward's out and lse) instead of the benchmark's

    torchrun --standalone --nproc-per-node 2 scripts/dev/bwd_timing_probe.py --out $OUT
Rows per rank in bwd_timing_probe_rank{R}.csv; a CPU run (gloo, reference kernel, tiny sizes)
checks the plumbing: --cpu --seqlen-per-gpu 256 --backend reference.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.append(str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.cp.local_kernel import LocalKernel  # noqa: E402
from bench.cp.magi import MagiAttention  # noqa: E402
from bench.gate import gate_rows, restrict_dout  # noqa: E402
from bench.metrics import time_cuda_ms  # noqa: E402
from bench.problem import Inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.api._tune_cut import CUTS, _Clock  # noqa: E402

FIELDS = ("mask", "backend", "dout", "cut", "rank", "way", "ms", "gpu_name")
HQ, HKV, D = 64, 8, 128


def wall_ms(fn, warmup: int, repeat: int, sync) -> float:
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    sync()
    return (time.perf_counter() - start) / repeat * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seqlen-per-gpu", type=int, default=65536)
    p.add_argument("--mask", default="causal")
    p.add_argument("--backend", default="triton")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=6)
    p.add_argument("--cpu", action="store_true", help="gloo and the CPU (plumbing check)")
    p.add_argument("--restricted-dout", action="store_true",
                   help="dout zero off the gate's rows, as the CP runner's first seqlen times it")
    args = p.parse_args()
    if args.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        sync, dtype, gpu = (lambda: None), torch.float32, "cpu"
        timer = lambda fn: wall_ms(fn, args.warmup, args.repeat, sync)  # noqa: E731
    else:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        sync, dtype, gpu = torch.cuda.synchronize, torch.bfloat16, torch.cuda.get_device_name()
        timer = lambda fn: time_cuda_ms(fn, args.warmup, args.repeat)  # noqa: E731
    rank, world = dist.get_rank(), dist.get_world_size()
    args.out.mkdir(parents=True, exist_ok=True)
    seqlen = args.seqlen_per_gpu * world
    mask = cell_mask(MaskChoice(label=args.mask, name=args.mask, params={}), seqlen, DataConfig(),
                     HKV)
    strategy = MagiAttention(mask, None, num_heads_q=HQ, num_heads_kv=HKV,
                             kernel=LocalKernel(args.backend), cut="none")
    runtime = strategy.key.runtime
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v, dout = (torch.randn(seqlen, h, D, device=device, generator=g).to(dtype)
                     for h in (HQ, HKV, HKV, HQ))
    if args.restricted_dout:
        rows = gate_rows(seqlen, rows=256, full_max_seqlen=2048, seed=0)
        inputs = Inputs(q[None], k[None], v[None], dout[None])
        restrict_dout(inputs, rows)
    q, k, v, dout = (strategy.shard(t) for t in (q, k, v, dout))
    dout_kind = "restricted" if args.restricted_dout else "random"
    path = args.out / f"bwd_timing_probe_{dout_kind}_rank{rank}.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for cut in ("none", "bwd"):
            runtime.cut = CUTS[cut]
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = strategy.attention(*leaves)

            def bench():
                torch.autograd.grad(out, leaves, dout, retain_graph=True)
            o, lse, saved = runtime.forward_saving(q, k, v)

            def direct():
                runtime.backward(dout, q, k, v, o, lse, saved)
            clock = _Clock(runtime.group, device, 2)
            n = runtime.meta.shard_seqlen
            gt = torch.Generator(device=device).manual_seed(0)
            tq, tk, tv, tdout = (torch.randn(n, h, D, device=device, dtype=dtype, generator=gt)
                                 for h in (HQ, HKV, HKV, HQ))
            to, tl, ts = runtime.forward_saving(tq, tk, tv)

            def tuner_inputs():
                runtime.backward(tdout, tq, tk, tv, to, tl, ts)
            times = {"bench_events": timer(bench),
                     "bench_wall": wall_ms(bench, args.warmup, args.repeat, sync),
                     "runtime_events": timer(direct),
                     "runtime_wall": wall_ms(direct, args.warmup, args.repeat, sync),
                     "tuner_clock": clock.seconds(direct, "bwd") * 1e3,
                     "tuner_inputs": timer(tuner_inputs)}
            for way, ms in times.items():
                writer.writerow(dict(mask=args.mask, backend=args.backend, dout=dout_kind,
                                     cut=cut, rank=rank,
                                     way=way, ms=f"{ms:.3f}", gpu_name=gpu))
            f.flush()
            print(f"rank {rank} cut={cut}: " + ", ".join(f"{w} {ms:.1f}" for w, ms in times.items()),
                  flush=True)
            del out, o, lse, saved, leaves, to, tl, ts
    runtime.cut = frozenset()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
