"""The GPU timeline of a chrome trace written by magi_trace.py: each kernel's start (us from the
trace's first kernel), duration and stream, in order, plus each forward's prologue (from the end
of one attention kernel to the start of the next; the listing shows what ran in between).

    python scripts/dev/trace_timeline.py results/h200x2/cp_s42/trace/trace_*_rank1.json.gz
"""
from __future__ import annotations

import argparse
import gzip
import json

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
ATTENTION = ("_fwd_kernel", "flash_fwd")  # the forward kernels whose gaps are the prologues


def gpu_events(path: str) -> list[dict]:
    with gzip.open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    return sorted(events, key=lambda e: e["ts"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--limit", type=int, default=80, help="kernels listed per trace")
    args = p.parse_args()
    for path in args.traces:
        events = gpu_events(path)
        t0 = events[0]["ts"]
        print(f"== {path}")
        for e in events[:args.limit]:
            print(f"{e['ts'] - t0:10.1f} {e['dur']:9.1f}  stream {e['args'].get('stream')}  "
                  f"{e['name'][:60]}")
        starts = [e for e in events if e["name"].startswith(ATTENTION)]
        for prev, nxt in zip(starts, starts[1:]):
            gap = nxt["ts"] - (prev["ts"] + prev["dur"])
            if gap < 2000:  # consecutive forwards (the backward's kernels sit between others)
                print(f"prologue {gap:7.1f} us before the forward kernel at "
                      f"{nxt['ts'] - t0:.1f}")


if __name__ == "__main__":
    main()
