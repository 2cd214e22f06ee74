"""Interleaved timing of CP strategies on one cell: every strategy built once, then timed in
turn, round after round, so a drift of the GPU's clocks lands on all of them alike.

The CP runner times its cells one after the other (build, gate, time, free), so two strategies
of one cell are timed seconds apart, each after its own build's idle; at 16k tokens a GPU that
spread identical work by up to 13% (RESULTS.md "Session 31", cp 1). A ratio near 1.0 there is
decided here: each round times every strategy's forward and backward (the runner's way: median
of `hardware.repeat` after the warm-up, `hardware.warmup_ms` included; the slowest rank's), and
each strategy's round times are summarised by their median. Correctness is the runner's job; nothing is gated here.

    torchrun --nproc-per-node 2 scripts/dev/cp_ab.py --out $OUT --rounds 5 -- \\
        experiment=cp_h200x2 hardware=h200 local_kernel=fa4 'cp=[magi,hybrid_cp]' \\
        mask=causal_document 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]'

The Hydra overrides pick the strategies, the masks (each in turn: its strategies built, timed
over the rounds and freed before the next mask's), the per-GPU seqlen and cp size (the first of
each), the hardware and the local kernel, as for `python -m bench.cp`; one launch for several
masks saves a launch's start-up and compiles a mask.
Rows: `cp_ab.csv` (mask, strategy, direction, round, ms), and a summary on rank 0's stdout;
`cp_ab_gc_rank<r>.csv` (each rank's): every garbage collection that ran inside a timing block
(generation, ms, objects collected; with the default `collect`, the block's first is
time_cuda_ms's own). `--keep-garbage` times as before session 50 (no collection first);
`--gc-off` keeps the automatic collector off inside each block instead (notes/magi_cp.md,
session 51: does a collection *during* the block, or the garbage left before it, slow a magi
forward timed right after another magi key's backward?). `--census`: after each block, the
cyclic garbage it left is counted and freed (`cp_ab_census_rank<r>.csv`: objects, tensors,
their storage MB, the commonest types). On CUDA, `cp_ab_alloc_rank<r>.csv`: the caching
allocator's device allocations, frees, retries and all-stream syncs during each block, and the
MB reserved after it. `cp_ab_host_rank<r>.csv`: the host's wall and CPU ms a call inside each
block's calls (launch-bound where the wall nears the GPU's ms). `--stage-events`:
`cp_ab_stage_rank<r>.csv`, magi's kernel calls and collective waits marked by CUDA events in each
block (scripts/dev/stage_events.py), ms a call; `--per-call`: `cp_ab_calls_rank<r>.csv`, every
call of each block (host issue time, host wall and CPU ms, GPU ms; the timed ones last).
`--pause-ms N`: the host sleeps N ms before each block (with `--keep-garbage`: a full
collection's pause without the collection; session 52);
`--sync-first`: `torch.cuda.synchronize()` (every stream of the device) before each block.
`--clock key`: each block timed the way MagiAttention's key times its choices
(`_tune_cut._Clock`: settle, then back-to-back calls for at least 0.2 s and at least 2, no
warm-up time) instead of the runner's way, its rows labelled `<strategy>@key`; `--clock both`:
each strategy and direction timed both ways in turn, in one launch (notes/magi_cp.md "Session
59": the bench times magi 1-7% slower than its key does; the GPU's state, or magi's path?).
The per-block tables are block_probes.py's (one job: record beside a timing, write once).
"""
from __future__ import annotations

import argparse
import csv
import functools
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hydra import compose, initialize_config_dir  # noqa: E402

from bench.config import CONFIGS_DIR, cp_bench_config, register_schemas  # noqa: E402
from bench.cp.local_kernel import LocalKernel  # noqa: E402
from bench.cp.runner import (agreed_count, build_strategy,  # noqa: E402
                             default_cuda_connections, group_max, init_distributed, timed_call)
from bench.metrics import time_cuda_ms  # noqa: E402
from bench.problem import make_inputs  # noqa: E402
from bench.sweep import cell_mask, free_memory  # noqa: E402
from magi_attention.api._tune_cut import _Clock  # noqa: E402
from block_probes import BlockProbes  # noqa: E402  (scripts/dev, beside this file)


def load_config(overrides: list[str]):
    default_cuda_connections()  # bench.cp's queue count, before the preset's check starts CUDA
    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return cp_bench_config(compose(config_name="cp_bench", overrides=overrides))


def build(config, device: torch.device, group, choice) -> tuple[list, list]:
    """(labels, [(strategy, (q, k, v, dout) local)]) of the config's strategies on the mask
    ``choice`` (one of ``config.masks``) at its first per-GPU seqlen and cp size."""
    hw, cp_size = config.hardware, config.cp_sizes[0]
    seqlen = config.seqlen_per_gpu[0] * cp_size
    mask = cell_mask(choice, seqlen, config.data, hw.num_heads_kv)
    inputs = make_inputs(config.shapes(seqlen), device, seed=config.seed)
    kernel = LocalKernel(backend=config.local_kernel)
    labels, built = [], []
    for spec in config.strategies:
        strategy = build_strategy(spec, mask, group, hw, kernel)
        local = [strategy.shard(t[0]) for t in (inputs.q, inputs.k, inputs.v, inputs.dout)]
        labels.append(spec.label)
        built.append((strategy, local))
        if dist.get_rank() == 0 and getattr(strategy, "notes", ""):  # what the key chose
            print(f"{choice.label} {spec.label}: {strategy.notes}", flush=True)
    return labels, built


@dataclass(frozen=True)
class BlockSettings:
    """What runs around each timing block: the command line's flags, handed down as one."""

    collect: bool = True     # time_cuda_ms settles first (False: --keep-garbage)
    gc_off: bool = False     # the automatic collector off inside the block
    census: bool = False     # count (then free) the cyclic garbage the block left
    pause_ms: float = 0.0    # the host sleeps this long before the block
    sync_first: bool = False  # torch.cuda.synchronize() (every stream) before the block
    stage_events: bool = False  # mark the runtime's kernels and collective waits in the block
    per_call: bool = False   # each call's host issue time, host wall and CPU ms, GPU ms
    clock: str = "runner"    # runner | key (as the key's _Clock times) | both, in turn

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "BlockSettings":
        return cls(collect=not args.keep_garbage, gc_off=args.gc_off, census=args.census,
                   pause_ms=args.pause_ms, sync_first=args.sync_first,
                   stage_events=args.stage_events, per_call=args.per_call,
                   clock=args.clock)


# this rank's probe tables beside the timings (block_probes.py), written by run()
PROBES = BlockProbes()


def run(config, rounds: int, out: Path | None, mask_rounds=None, name: str = "cp_ab",
        header: tuple[str, ...] = ("mask", "strategy", "direction", "round", "ms")) -> dict:
    """{(mask, label, direction): [ms per round]} (the slowest rank's) on rank 0, {} on the
    others; rank 0 writes them to ``out`` / f"{name}.csv" as rows while they come.
    ``mask_rounds`` (default: this script's, the config's strategies in turn) times one mask:
    (config, choice, rounds, write, device, comm_device, group) -> {key: [ms per round]}."""
    created = init_distributed(config.hardware.device)
    device = (torch.device("cuda", torch.cuda.current_device())
              if config.hardware.device == "cuda" else torch.device("cpu"))
    comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")
    cp_size = config.cp_sizes[0]
    group = dist.new_group(list(range(cp_size)))  # every rank calls new_group
    times: dict = {}
    PROBES.clear()
    try:
        if dist.get_rank() < cp_size:
            times = _rounds(config, rounds, out, device, comm_device, group,
                            mask_rounds or _mask_rounds, name, header)
            if out is not None:
                PROBES.write(out, name, dist.get_rank())
        dist.barrier()
        if dist.get_rank() != 0:
            times = {}
    finally:
        if created:
            dist.destroy_process_group()
    return times


def _rounds(config, rounds, out, device, comm_device, group, mask_rounds, name, header) -> dict:
    handle = None
    if out is not None and dist.get_rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        handle = (out / f"{name}.csv").open("w", newline="")
        writer = csv.writer(handle)
        writer.writerow(header)

    def write(row):  # rank 0's rows, flushed as they come
        if handle is not None:
            writer.writerow(row)
            handle.flush()

    times: dict = {}
    try:
        for choice in config.masks:
            times.update(mask_rounds(config, choice, rounds, write, device, comm_device, group))
            free_memory(device)  # the mask's strategies and inputs, before the next mask's
    finally:
        if handle is not None:
            handle.close()
    return times


def _mask_rounds(config, choice, rounds, write, device, comm_device, group,
                 settings: BlockSettings = BlockSettings()) -> dict:
    """{(mask, label, direction): [ms per round]} of one mask's strategies."""
    labels, built = build(config, device, group, choice)
    calls = [{d: timed_call(strategy, local, d) for d in config.directions}
             for strategy, local in built]
    return timed_rounds(config, choice, labels, calls, rounds, write, comm_device, group,
                        settings=settings)


def timed_rounds(config, choice, labels, calls, rounds, write, comm_device, group,
                 before=None, settings: BlockSettings = BlockSettings()) -> dict:
    """{(mask, label, direction): [ms per round]}: each label's calls ({direction: fn}) timed
    in turn, round after round; ``before(i)``, where given, runs before the i-th label's;
    ``settings``: what runs around each block (BlockSettings). What each block's probes
    record (collections, allocator, host time, with the flags the census and the stage
    events) goes to PROBES."""
    hw = config.hardware
    agree = agreed_count(group, comm_device)
    clocks = ("runner", "key") if settings.clock == "both" else (settings.clock,)
    # one key clock for the mask: its first timing of a (label, direction) sets that one's count
    key_clock = _Clock(group, comm_device, min_iters=2) if "key" in clocks else None
    times: dict = {}
    for r in range(rounds):
        for i, (label, fns) in enumerate(zip(labels, calls)):
            if before is not None:
                before(i)
            for direction, clock in ((d, c) for d in config.directions for c in clocks):
                name = label if clock == "runner" else f"{label}@key"
                if settings.sync_first:
                    torch.cuda.synchronize()
                time.sleep(settings.pause_ms / 1e3)
                with PROBES.block((choice.label, name, direction, r), fns[direction],
                                  settings.gc_off, settings.census,
                                  settings.stage_events, settings.per_call) as block:
                    if clock == "key":
                        block.ms = key_clock.seconds(block.clock, (label, direction)) * 1e3
                    else:
                        block.ms = time_cuda_ms(block.clock, hw.warmup, hw.repeat,
                                                hw.warmup_ms, agree, settings.collect)
                ms = group_max(block.ms, group, comm_device)
                times.setdefault((choice.label, name, direction), []).append(ms)
                write([choice.label, name, direction, r, f"{ms:.4f}"])
    return times


def summary(times: dict) -> list[str]:
    """Per mask, each strategy's median over the rounds, and its ratio to the first
    strategy's."""
    lines = []
    masks = dict.fromkeys(m for m, _, _ in times)  # in the order they ran
    for mask, direction in ((m, d) for m in masks for d in sorted({d for *_, d in times})):
        base = None
        for (m, label, d), ms in times.items():
            if (m, d) != (mask, direction):
                continue
            med = statistics.median(ms)
            base = base or med
            lines.append(f"{mask} {direction} {label}: median {med:.3f} ms over {len(ms)} rounds "
                         f"(min {min(ms):.3f}, max {max(ms):.3f}); first / this {base / med:.3f}")
    return lines


def parse_args(argv, description: str) -> argparse.Namespace:
    """--out, --rounds and the Hydra overrides of an interleaved probe's command line."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--keep-garbage", action="store_true",
                   help="no garbage collection before each timing (the timings before session 50)")
    p.add_argument("--gc-off", action="store_true",
                   help="the automatic garbage collector off inside each timing block")
    p.add_argument("--census", action="store_true",
                   help="count (then free) the cyclic garbage each timing block left")
    p.add_argument("--pause-ms", type=float, default=0.0,
                   help="the host sleeps this long before each timing block")
    p.add_argument("--stage-events", action="store_true",
                   help="mark magi's kernel calls and collective waits with CUDA events in each "
                        "block (cp_ab_stage_rank<r>.csv)")
    p.add_argument("--per-call", action="store_true",
                   help="each call of each block: host issue time, host wall and CPU ms, GPU ms "
                        "(cp_ab_calls_rank<r>.csv; the last hardware.repeat are the timed ones)")
    p.add_argument("--sync-first", action="store_true",
                   help="torch.cuda.synchronize() (every stream) before each timing block")
    p.add_argument("--clock", choices=("runner", "key", "both"), default="runner",
                   help="key: time each block as MagiAttention's key times its choices "
                        "(settle, back-to-back calls for >= 0.2 s; rows <strategy>@key); both: "
                        "each block both ways in turn")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m bench.cp")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv, __doc__.splitlines()[0])
    mask_rounds = functools.partial(_mask_rounds, settings=BlockSettings.from_args(args))
    times = run(load_config(args.overrides), args.rounds, args.out, mask_rounds)
    if times:  # rank 0
        print("\n".join(summary(times)))


if __name__ == "__main__":
    main()
