"""How fast can one rank's remote KV cross NVLink at cp 2? The group-cast's NCCL all_to_all_v
against pulling the peer's send buffer through symmetric memory (a copy from a peer-mapped
view) and pushing into the peer's (notes/magi_cp.md "Session 26").

    torchrun --nproc-per-node 2 scripts/dev/cast_bandwidth.py --out $OUT [--mb 8 28 64]

Each rank sends ``mb`` MB to the other (none to itself), as the cast of a causal_document
16k cell does (~28 MB a rank); time per exchange from CUDA events over ``--repeat`` calls,
after a barrier, the slower rank's mean. Rows: method, mb, us, GB/s (one direction, per rank).
"""
from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

import torch
import torch.distributed as dist


def _time_us(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    mine = torch.tensor([start.elapsed_time(end) * 1000 / repeat], device="cuda")
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return float(mine)


def nccl_a2a(numel: int):
    rank, world = dist.get_rank(), dist.get_world_size()
    send = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    recv = torch.empty_like(send)
    splits = [0 if r == rank else numel // (world - 1) for r in range(world)]

    def step():
        dist.all_to_all_single(recv, send, splits, splits)
    return step


def nccl_a2a_one_way(numel: int):
    """Rank 0 sends ``numel`` to rank 1 and gets a sixth of it back: the causal_document 16k
    cast's shape (27.6 MB one way, 4.4 MB the other)."""
    rank = dist.get_rank()
    send = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    recv = torch.empty_like(send)
    big, small = numel, numel // 6
    send_splits = [0, big] if rank == 0 else [small, 0]
    recv_splits = [0, small] if rank == 0 else [big, 0]

    def step():
        dist.all_to_all_single(recv[:sum(recv_splits)], send[:sum(send_splits)], recv_splits,
                               send_splits)
    return step


def symm_copy(numel: int, direction: str):
    """pull: copy the peer's buffer into a local one; push: copy a local one into the peer's.
    A device-side barrier before (the data is ready) and after (the buffer may be reused)."""
    import torch.distributed._symmetric_memory as symm_mem
    rank, world = dist.get_rank(), dist.get_world_size()
    peer = (rank + 1) % world
    buf = symm_mem.empty(numel, dtype=torch.bfloat16, device="cuda")
    buf.normal_()
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    remote = hdl.get_buffer(peer, (numel,), torch.bfloat16)
    local = torch.empty_like(buf)

    def step():
        hdl.barrier(channel=0)
        if direction == "pull":
            local.copy_(remote)
        else:
            remote.copy_(local)
        hdl.barrier(channel=1)
    return step


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--mb", type=float, nargs="+", default=[8, 16, 28, 64, 128])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--file", default="cast_bandwidth.csv", help="the rows' file under --out")
    args = p.parse_args(argv)
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    methods = {"nccl_a2a": nccl_a2a, "nccl_a2a_one_way": nccl_a2a_one_way,
               "symm_pull": lambda n: symm_copy(n, "pull"),
               "symm_push": lambda n: symm_copy(n, "push")}
    rows = []
    setting = os.environ.get("CAST_ENV", "")  # the NCCL setting a row was measured under
    args.out.mkdir(parents=True, exist_ok=True)
    for mb in args.mb:
        numel = int(mb * 1e6) // 2
        for name, make in methods.items():
            try:
                us = _time_us(make(numel), args.warmup, args.repeat)
                row = dict(method=name, mb=mb, us=round(us, 1), gb_per_s=round(mb * 1e3 / us, 1),
                           env=setting)
            except Exception as e:  # a method this torch build lacks: say so, keep the rest
                row = dict(method=name, mb=mb, us="", gb_per_s=f"X {type(e).__name__}: {e}"[:200],
                           env=setting)
            rows.append(row)
            if rank == 0:
                print(row, flush=True)
                with (args.out / args.file).open("w", newline="") as f:
                    w = csv.DictWriter(f, list(row))
                    w.writeheader()
                    w.writerows(rows)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
