"""What cp_ab.py records beside each timing block's time, per rank: one table a probe, written
once at the end (``<name>_<kind>_rank<r>.csv``).

- gc: every garbage collection inside the block (generation, ms, objects collected).
- census (``--census``): the cyclic garbage the block left, counted and then freed.
- alloc (CUDA): the caching allocator's counters' change over the block, MB reserved after it.
- host: the host's wall and thread-CPU ms a call inside the block's calls, the block's span in
  unix time (to line up with a GPU clock log) and this rank's own median (``rank_ms``).
- stage (``--stage-events``): magi's kernel calls, collective waits and fused-buffer fills
  (stage_events.py).
- calls (``--per-call``): every call of the block, in order: when the host issued it (ms since
  the block's first call), its host wall and thread-CPU ms (a lock or driver wait shows as wall
  above CPU) and its GPU ms (CUDA events around it on the current stream; host clock off CUDA).
  The last ``hardware.repeat`` calls are the timed ones.

They were added one session at a time while looking for the second magi key's slow forward
(notes/magi_cp.md, sessions 50-53): garbage, the allocator, the host and the kernel/wait split.
"""
from __future__ import annotations

import collections
import contextlib
import csv
import gc
import time
from pathlib import Path

import torch

from stage_events import StageEvents, elapsed_ms, mark

KEY = ("mask", "strategy", "direction", "round")  # each row's block
ALLOC_COUNTERS = ("num_alloc_retries", "num_device_alloc", "num_device_free",
                  "num_sync_all_streams")
HEADERS = {
    "gc": (*KEY, "generation", "ms", "collected"),
    "census": (*KEY, "objects", "tensors", "mb", "types"),
    "alloc": (*KEY, *ALLOC_COUNTERS, "reserved_mb"),
    "host": (*KEY, "calls", "wall_ms_per_call", "cpu_ms_per_call", "start_unix_s", "end_unix_s",
             "rank_ms"),
    "stage": (*KEY, "calls", "kernels", "kernel_ms_per_call", "waits", "wait_ms_per_call",
              "fills", "fill_ms_per_call"),
    "calls": (*KEY, "call", "host_start_ms", "host_ms", "cpu_ms", "gpu_ms"),
}
ALWAYS_WRITTEN = ("gc", "host")  # the others only where they have rows (census, CUDA, flags)


class HostClock:
    """Wraps a call: counts it and sums the wall and this thread's CPU time spent inside;
    ``per_call``: also keeps each call's host start and end and its GPU marks (``spans``)."""

    def __init__(self, fn, per_call: bool = False) -> None:
        self.fn, self.calls, self.wall_s, self.cpu_s = fn, 0, 0.0, 0.0
        self.per_call, self.spans = per_call, []  # (host start, host end, CPU s, mark, mark)

    def __call__(self):
        wall, cpu = time.perf_counter(), time.thread_time()
        first = mark() if self.per_call else None
        try:
            return self.fn()
        finally:
            end, cpu_s = time.perf_counter(), time.thread_time() - cpu
            if self.per_call:
                self.spans.append((wall, end, cpu_s, first, mark()))
            self.wall_s += end - wall
            self.cpu_s += cpu_s
            self.calls += 1

    def call_rows(self) -> list:
        """[call, host start ms since the first call, host ms, CPU ms, GPU ms] of each call
        (after a synchronise on CUDA: every mark has completed)."""
        t0 = self.spans[0][0] if self.spans else 0.0
        return [[i, f"{(a - t0) * 1e3:.3f}", f"{(b - a) * 1e3:.3f}", f"{c * 1e3:.3f}",
                 f"{elapsed_ms(x, y):.4f}"] for i, (a, b, c, x, y) in enumerate(self.spans)]

    def row(self) -> list:
        """[calls, wall ms a call, CPU ms a call] (formatted for the csv)."""
        n = max(self.calls, 1)
        return [self.calls, f"{self.wall_s * 1e3 / n:.3f}", f"{self.cpu_s * 1e3 / n:.3f}"]


def allocator_counters() -> dict[str, int]:
    """The CUDA caching allocator's counters of ALLOC_COUNTERS and reserved bytes now ({} off
    CUDA)."""
    if not torch.cuda.is_available():
        return {}
    stats = torch.cuda.memory_stats()
    return {**{k: int(stats.get(k, 0)) for k in ALLOC_COUNTERS},
            "reserved": int(stats.get("reserved_bytes.all.current", 0))}


def garbage_census() -> tuple[int, int, float, str]:
    """(objects, tensors, MB of their distinct storages, the five commonest types) of the
    cyclic garbage there is now, which is then freed."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    storages = {}
    for obj in found:
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    tensors = sum(isinstance(obj, torch.Tensor) for obj in found)
    types = " ".join(f"{name}:{n}" for name, n in
                     collections.Counter(type(o).__qualname__ for o in found).most_common(5))
    count = len(found)
    del found
    gc.collect()  # what DEBUG_SAVEALL kept
    return count, tensors, sum(storages.values()) / 1e6, types


@contextlib.contextmanager
def collections_in(events: list, disable: bool = False):
    """Appends (generation, seconds, objects collected) to ``events`` for each garbage
    collection that runs inside the block; ``disable``: the automatic collector is off in it
    (an explicit gc.collect() still runs and is recorded)."""
    started: list[float] = []

    def hook(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            events.append((info["generation"], time.perf_counter() - started.pop(),
                           info["collected"]))
    enabled = gc.isenabled()
    if disable:
        gc.disable()
    gc.callbacks.append(hook)
    try:
        yield events
    finally:
        gc.callbacks.remove(hook)
        if disable and enabled:
            gc.enable()


def write_csv(path: Path, header: tuple[str, ...], rows: list) -> None:
    """``header`` then ``rows`` to the CSV file ``path`` (this rank's, written once)."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


class Block:
    """One timing block under the probes: ``clock`` is the call to time (the block's fn, counted
    and host-timed); set ``ms`` to the block's timing before it closes."""

    def __init__(self, fn, per_call: bool = False) -> None:
        self.clock, self.ms = HostClock(fn, per_call), float("nan")


class BlockProbes:
    """This rank's probe tables (``rows[kind]``, kinds as HEADERS), filled block by block."""

    def __init__(self) -> None:
        self.rows: dict[str, list] = {kind: [] for kind in HEADERS}

    def clear(self) -> None:
        for rows in self.rows.values():
            rows.clear()

    @contextlib.contextmanager
    def block(self, key: tuple, fn, gc_off: bool = False, census: bool = False,
              stage_events: bool = False, per_call: bool = False):
        """Records the block ``key`` (mask, strategy, direction, round) around its timing of
        ``fn``; yields the Block whose clock the timing calls."""
        key = list(key)
        before, start, marks = allocator_counters(), time.time(), StageEvents()
        block = Block(fn, per_call)
        with (collections_in([], disable=gc_off) as events,
              marks.installed() if stage_events else contextlib.nullcontext()):
            yield block
        if stage_events:  # the timing synchronised: every event has completed
            self.rows["stage"].append([*key, block.clock.calls, *marks.row(block.clock.calls)])
        self.rows["calls"].extend([*key, *row] for row in block.clock.call_rows())
        after = allocator_counters()
        self.rows["host"].append([*key, *block.clock.row(), f"{start:.3f}", f"{time.time():.3f}",
                                  f"{block.ms:.4f}"])
        self.rows["gc"].extend([*key, gen, f"{sec * 1e3:.2f}", n] for gen, sec, n in events)
        if after:
            self.rows["alloc"].append([*key, *(after[k] - before[k] for k in ALLOC_COUNTERS),
                                       f"{after['reserved'] / 2**20:.0f}"])
        if census:
            objects, tensors, mb, types = garbage_census()
            self.rows["census"].append([*key, objects, tensors, f"{mb:.1f}", types])

    def write(self, out: Path, name: str, rank: int) -> None:
        """Each table to ``out / f"{name}_{kind}_rank{rank}.csv"`` (the empty ones only where
        ALWAYS_WRITTEN)."""
        for kind, rows in self.rows.items():
            if rows or kind in ALWAYS_WRITTEN:
                write_csv(out / f"{name}_{kind}_rank{rank}.csv", HEADERS[kind], rows)
