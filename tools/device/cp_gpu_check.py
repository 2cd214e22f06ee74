"""Every CP strategy x mask on NCCL in bf16, checked against single-device attention.

    torchrun --nproc-per-node 4 tools/device/cp_gpu_check.py --out $OUT/cp_gpu_check.csv

Same check as tests/bench/cp/test_strategies.py (bench.cp.verify), on GPUs: out, dq, dk, dv
gathered back to global order must pass the benchmark's gate (``bench.gate``: relative L2 error
within the bound of the dtype) against the reference kernel in fp32. Rank 0 appends one CSV
row per cell as soon as it is done (a rerun with the same --out skips cells already there) and
prints a summary line per cell; a failing cell is a row with status error, never the end of the
run. Exit status 1 if any cell is mismatch or error.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import os
import sys

import torch
import torch.distributed as dist

from bench.cp import STRATEGIES
from bench.cp.local_kernel import LocalKernel
from bench.cp.verify import GRAD_NAMES, Cell, Problem, check_cell
from bench.data import sample_doc_lens
from bench.masks import MASK_NAMES

COLUMNS = (["cell", "strategy", "knobs", "mask", "cp_size", "seqlen", "num_heads_q",
            "num_heads_kv", "head_dim", "dtype", "backend", "gpu_name", "status", "message",
            "notes", "seconds", "comm_bytes_fwd", "comm_bytes_bwd"]
           + [f"{kind}_{n}" for kind in ("err", "tol") for n in GRAD_NAMES])


def _configs(cp_size: int) -> list[tuple[str, dict]]:
    """Each strategy at its defaults, plus the 2D variants that differ at this cp_size."""
    out = [(name, {}) for name in STRATEGIES]
    if cp_size >= 2:
        out.append(("usp", {"ulysses_degree": 2}))
    if cp_size >= 4:
        out.append(("loongtrain", {"head_parallel_degree": 1, "window_size": 2}))
    return out


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="CSV file (appended to; done cells skipped)")
    p.add_argument("--seqlen", type=int, default=8192)
    p.add_argument("--num-heads-q", type=int, default=8)
    p.add_argument("--num-heads-kv", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--backend", default="auto", help="local kernel: auto, triton, fa4, reference")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--doc-seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true",
                   help="gloo on CPU instead of NCCL (a smoke test of this script)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--masks", default=",".join(MASK_NAMES))
    return p.parse_args(argv)


def _done(path: str) -> set[str]:
    if not os.path.exists(path):
        return set()
    with open(path, newline="") as f:
        return {row["cell"] for row in csv.DictReader(f)}


def _csv_row(row: dict, problem: Problem, args, cp_size: int) -> dict:
    out = {c: "" for c in COLUMNS}
    out.update(cell=row["cell"], strategy=row["strategy"], knobs=row["knobs"], mask=row["mask"],
               cp_size=cp_size, seqlen=problem.seqlen, num_heads_q=problem.num_heads_q,
               num_heads_kv=problem.num_heads_kv, head_dim=problem.head_dim, dtype=problem.dtype,
               backend=args.backend,
               gpu_name=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
               status=row["status"], message=row["message"], notes=row.get("notes", ""),
               seconds=row.get("seconds", ""))
    comm = row.get("comm_bytes", {})
    out.update(comm_bytes_fwd=comm.get("fwd", ""), comm_bytes_bwd=comm.get("bwd", ""))
    for kind, key in (("err", "errors"), ("tol", "tolerances")):
        for n, value in row.get(key, {}).items():
            out[f"{kind}_{n}"] = f"{value:.4g}"
    return out


def main(argv=None) -> int:
    args = _parse(argv)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    timeout = datetime.timedelta(minutes=5)
    if args.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
    else:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device, timeout=timeout)
    cp_size, rank = dist.get_world_size(), dist.get_rank()
    problem = Problem(seqlen=args.seqlen, num_heads_q=args.num_heads_q,
                      num_heads_kv=args.num_heads_kv, head_dim=args.head_dim,
                      doc_lens=tuple(sample_doc_lens(args.seqlen, seed=args.doc_seed)),
                      dtype=args.dtype, oracle="reference")
    kernel = LocalKernel(backend=args.backend)
    strategies, masks = args.strategies.split(","), args.masks.split(",")
    # block_sparse with one mask per KV head: every strategy must refuse it with a reason
    per_head = [("block_sparse", {"num_heads_kv": args.num_heads_kv})] if args.num_heads_kv > 1 else []
    cells = [Cell(name, mask, knobs, params) for name, knobs in _configs(cp_size)
             if name in strategies for mask, params in [(m, {}) for m in masks] + per_head]
    skip = [sorted(_done(args.out)) if rank == 0 else None]
    dist.broadcast_object_list(skip, src=0)
    todo = [c for c in cells if c.id not in set(skip[0])]
    failed = 0
    for cell in todo:
        row = check_cell(cell, problem, kernel=kernel, device=device)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if rank != 0:
            continue
        new_file = not os.path.exists(args.out)
        with open(args.out, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            if new_file:
                writer.writeheader()
            writer.writerow(_csv_row(row, problem, args, cp_size))
        failed += row["status"] in ("mismatch", "error")
        errs = " ".join(f"{n}={v:.2g}" for n, v in row.get("errors", {}).items())
        print(f"[cp={cp_size}] {row['cell']:<60} {row['status']:<11} {errs} {row['message'][:160]}",
              flush=True)
    flag = torch.tensor([failed], device=device)
    dist.broadcast(flag, src=0)
    dist.destroy_process_group()
    return 1 if int(flag) else 0


if __name__ == "__main__":
    sys.exit(main())
