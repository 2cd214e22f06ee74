"""Where a magi forward timed right after another magi key's backward loses its time
(notes/magi_cp.md, session 50): cp_ab's interleaved rounds over the config's strategies, then
one more round whose forward timings run under torch.profiler (every rank), then each
forward's host time.

    torchrun --nproc-per-node 2 scripts/dev/second_key_probe.py --keep-garbage --out $OUT \\
        --rounds 3 -- experiment=cp_h200x2 hardware=auto local_kernel=triton \\
        'cp=[magi,magi_twin,hybrid_cp]' mask=block_causal_document 'seqlen_per_gpu=[16384]' \\
        'cp_sizes=[2]'

(magi_twin: configs/cp/magi.yaml under another package name, written by the device command:
`sed 's/^# @package cp.magi$/# @package cp.magi_twin/' configs/cp/magi.yaml >
configs/cp/magi_twin.yaml`. `--keep-garbage` times as before session 50, where the slow state
showed; without it time_cuda_ms collects garbage first.)

The profiled round times each forward as the rounds do (warm-up, `hardware.warmup_ms`, the timed
calls), so it profiles the state the rounds measure; its GPU events go to
`timeline_<mask>_rank<r>.csv` (strategy, kernel, stream, start_us, dur_us: every kernel, copy
and memset of the forward's timing block), and rank 0 prints per strategy and rank: the block's
ms, the attention kernel's mean, and how long NCCL kernels ran beside attention kernels on that
rank. `host_<mask>_rank<r>.csv`: each forward's host time a call while HOST_CALLS are issued back
to back, the wall time a call over them, and the first synchronising operation of one call
(torch.cuda.set_sync_debug_mode). With one mask on CUDA: 11 files (cp_ab.py's gc, allocator
and host rows per rank among them) and the log, more than the device brings back (8): tar them.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from block_probes import write_csv  # noqa: E402
from cp_ab import (BlockSettings, build, load_config, parse_args, run,  # noqa: E402
                   summary, timed_rounds)
from trace_timeline import ATTENTION, gpu_events  # noqa: E402

from bench.cp.runner import agreed_count, group_max, timed_call  # noqa: E402
from bench.metrics import time_cuda_ms  # noqa: E402

HOST_CALLS = 20  # forwards issued back to back for the host's time a call


def _gpu_events(prof) -> list[dict]:
    """The GPU events of a finished profile, by start (trace_timeline.py reads the trace)."""
    fd, path = tempfile.mkstemp(suffix=".json.gz")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        return gpu_events(path)
    finally:
        os.unlink(path)


def overlap_us(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total time (us) during which an interval of ``a`` and one of ``b`` both run; each list
    holds (start, end) pairs that do not overlap among themselves."""
    total, j = 0.0, 0
    for start, end in sorted(a):
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            total += max(0.0, min(end, b[k][1]) - max(start, b[k][0]))
            k += 1
    return total


def _profiled_round(config, labels, calls, comm_device, group, collect) -> tuple[list, list]:
    """One round as the rounds run it, each forward's timing block profiled: (timeline rows,
    [(label, ms, attention mean us, NCCL-beside-attention us)]) of this rank."""
    hw = config.hardware
    agree = agreed_count(group, comm_device)
    cuda = torch.cuda.is_available()
    rows, stats = [], []
    for label, fns in zip(labels, calls):
        for direction in config.directions:
            profiled = direction == "fwd" and cuda
            with (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
                  if profiled else contextlib.nullcontext()) as prof:
                ms = time_cuda_ms(fns[direction], hw.warmup, hw.repeat, hw.warmup_ms, agree,
                                  collect)
            ms = group_max(ms, group, comm_device)  # as the rounds: the ranks meet after each
            if not profiled:
                continue
            events = _gpu_events(prof)
            rows += [[label, e["name"][:60], e["args"].get("stream"), f"{e['ts']:.1f}",
                      f"{e['dur']:.1f}"] for e in events]
            attn = [(e["ts"], e["ts"] + e["dur"]) for e in events
                    if e["name"].startswith(ATTENTION)]
            nccl = [(e["ts"], e["ts"] + e["dur"]) for e in events if "nccl" in e["name"]]
            mean = sum(end - start for start, end in attn) / max(len(attn), 1)
            stats.append((label, ms, mean, overlap_us(attn, nccl)))
    return rows, stats


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
                             settings=BlockSettings(collect=collect))
        rank = dist.get_rank()
        rows, stats = _profiled_round(config, labels, calls, comm_device, group, collect)
        write_csv(out / f"timeline_{choice.label}_rank{rank}.csv",
                  ("strategy", "kernel", "stream", "start_us", "dur_us"), rows)
        gathered = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, stats, group=group)
        if rank == 0:
            for r, rank_stats in enumerate(gathered):
                for label, ms, mean, beside in rank_stats:
                    print(f"profiled round, rank {r} {label}: fwd {ms:.3f} ms, attention kernel "
                          f"{mean:.0f} us a call, NCCL beside it {beside:.0f} us in the block",
                          flush=True)
        hosts = []
        for label, fns in zip(labels, calls):
            dist.barrier(group)
            hosts.append([rank, label, *(f"{v:.1f}" if isinstance(v, float) else v
                                         for v in _host_us(fns["fwd"]))])
        write_csv(out / f"host_{choice.label}_rank{rank}.csv",
                  ("rank", "strategy", "host_us", "wall_us", "first_sync"), hosts)
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
