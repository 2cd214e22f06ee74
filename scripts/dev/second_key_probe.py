"""Where the second of two identical magi keys loses its forward time (notes/magi_cp.md,
session 50): cp_ab's interleaved rounds over the config's strategies, then each strategy's
forward profiled (torch.profiler, every rank): each kernel's mean device time and stream.

    torchrun --nproc-per-node 2 scripts/dev/second_key_probe.py --out $OUT --rounds 3 -- \\
        experiment=cp_h200x2 hardware=auto local_kernel=triton 'cp=[magi,magi_twin,hybrid_cp]' \\
        mask=block_causal_document 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]'

(magi_twin: configs/cp/magi.yaml under another package name, written by the device command;
session 50 ran it before time_cuda_ms collected garbage: `--keep-garbage` times that way.)
First each strategy's forward unprofiled: its host time a call while HOST_CALLS are issued
back to back, the wall time a call over them, and the first synchronising operation of one
call (torch.cuda.set_sync_debug_mode). Rows per mask and rank: `host_*.csv`, `kernels_*.csv`
(strategy, kernel, stream, calls, mean_us), and a trace of each strategy's profiled calls.
"""
from __future__ import annotations

import csv
import gzip
import json
import shutil
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cp_ab import build, load_config, parse_args, run, summary, timed_rounds  # noqa: E402

from bench.cp.runner import timed_call  # noqa: E402

CALLS = 10  # profiled forwards a strategy
HOST_CALLS = 20  # forwards issued back to back for the host's time a call
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _profile(fn, path: Path) -> list[dict]:
    """The GPU events of CALLS calls of ``fn`` (after one unprofiled call), by start time."""
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    fn()
    sync()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(CALLS):
            fn()
        sync()
    prof.export_chrome_trace(str(path))  # (off CUDA: CPU events only, no rows)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    return sorted(gpu, key=lambda e: e["ts"])


def _host_us(fn) -> tuple[float, float, str]:
    """(host us a call while issuing HOST_CALLS calls without waiting, device-and-host us a
    call over them, the first synchronising operation a call makes or "-"): a call whose host
    time is above its GPU time, or that waits for the GPU, runs at the host's pace."""
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    issued = time.perf_counter()
    sync()
    done = time.perf_counter()
    first_sync = "-"
    if cuda:
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn()
        except RuntimeError:
            first_sync = traceback.format_exc(limit=-6).replace("\n", " | ")
        finally:
            torch.cuda.set_sync_debug_mode(0)
        sync()
    return ((issued - start) / HOST_CALLS * 1e6, (done - start) / HOST_CALLS * 1e6, first_sync)


def _mask_rounds(out: Path, collect: bool):
    def mask_rounds(config, choice, rounds, write, device, comm_device, group) -> dict:
        labels, built = build(config, device, group, choice)
        calls = [{d: timed_call(s, local, d) for d in config.directions} for s, local in built]
        times = timed_rounds(config, choice, labels, calls, rounds, write, comm_device, group,
                             collect=collect)
        rank = dist.get_rank()
        kernels, hosts = [], []
        for label, fns in zip(labels, calls):
            dist.barrier(group)
            host_us, wall_us, first_sync = _host_us(fns["fwd"])
            hosts.append([rank, label, f"{host_us:.1f}", f"{wall_us:.1f}", first_sync])
            print(f"rank {rank} {label}: host {host_us:.1f} us a call, wall {wall_us:.1f} us; "
                  f"sync: {first_sync[:1500]}", flush=True)
            dist.barrier(group)
            trace = out / f"trace_{choice.label}_{label}_rank{rank}.json"
            events = _profile(fns["fwd"], trace)
            by_name = defaultdict(list)
            for e in events:
                by_name[(e["name"][:80], e["args"].get("stream"))].append(e["dur"])
            for (name, stream), durs in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
                kernels.append([rank, label, name, stream, len(durs),
                                f"{sum(durs) / len(durs):.1f}"])
            with open(trace, "rb") as f, gzip.open(f"{trace}.gz", "wb") as g:
                shutil.copyfileobj(f, g)
            trace.unlink()
        for name, rows, header in (("kernels", kernels, ("rank", "strategy", "kernel", "stream",
                                                          "calls", "mean_us")),
                                   ("host", hosts, ("rank", "strategy", "host_us", "wall_us",
                                                    "first_sync"))):
            with open(out / f"{name}_{choice.label}_rank{rank}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(header)
                w.writerows(rows)
        return times
    return mask_rounds


def main(argv=None) -> None:
    args = parse_args(argv, __doc__.splitlines()[0])
    args.out.mkdir(parents=True, exist_ok=True)
    times = run(load_config(args.overrides), args.rounds, args.out,
                mask_rounds=_mask_rounds(args.out, not args.keep_garbage))
    if times:
        print("\n".join(summary(times)))


if __name__ == "__main__":
    main()
