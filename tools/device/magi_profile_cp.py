"""Where MagiAttention's time goes at cp > 1: calc_attn against its own pieces, per rank.

For each mask (the CP benchmark's masks, GQA 64:8, head_dim 128, bf16), on every rank of a
torchrun launch: calc_attn forward and forward+backward as the CP runner times them, and, when
the key runs one fused kernel (``fused=True``), the pieces of that path timed alone: building
the fused KV buffer (the group-cast of the remote KV and the block copies), the local kernel's
forward and backward over the fused mask (the compute floor of this rank), and the group-reduce
of the received part's dK/dV. Every rank also writes torch.profiler tables of three fwd+bwd
steps (magi_profile.py's) and prints its device-to-host syncs per step.

    torchrun --standalone --nproc-per-node 2 tools/device/magi_profile_cp.py --out $OUT \
        --seqlen-per-gpu 16384 --masks causal_document full_document --backend fa4
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.append(str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.cp.local_kernel import LocalKernel  # noqa: E402
from bench.cp.magi import MagiAttention  # noqa: E402
from bench.cp.runner import agreed_count, timed_call  # noqa: E402
from bench.metrics import time_cuda_ms  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.api._tune_cut import _Clock  # noqa: E402
from magi_attention.functional import load_backend  # noqa: E402
from magi_profile import profile_steps  # noqa: E402  (this script's folder is on sys.path)

FIELDS = ("mask", "backend", "cp_size", "rank", "piece", "ms", "notes")
HQ, HKV, D = 64, 8, 128


def _train_step(strategy: MagiAttention, q, k, v, dout):
    """One calc_attn forward + backward on fresh leaves, as a training step runs it."""
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def step():
        out = strategy.attention(*leaves)
        torch.autograd.grad(out, leaves, dout)
    return step


def _pieces(strategy: MagiAttention, q, k, v, dout, warmup: int, repeat: int) -> dict[str, float]:
    """calc_attn fwd / fwd+bwd, and the fused path's pieces when it has one (the fused KV
    buffer, the own KV's copies into it, the own keys' kernel alone, the kernel over the buffer,
    the group-reduce)."""
    def fwd():
        with torch.no_grad():
            strategy.attention(q, k, v)
    times = {"calc_attn_fwd": time_cuda_ms(fwd, warmup, repeat),
             "calc_attn_fwd_bwd": time_cuda_ms(_train_step(strategy, q, k, v, dout), warmup,
                                               repeat)}
    runtime = strategy.key.runtime
    times.update(_backward_three_ways(strategy, q, k, v, dout, warmup, repeat))
    meta = runtime.meta
    if meta.fused is None or not meta.stages:
        return times
    backend = runtime.resolved_backend(q, k)
    mod, plan, scale, h = load_backend(backend), meta.fused.plan, D ** -0.5, HKV
    kv_all = runtime._fused_kv(k, v)
    out, lse, _ = mod.fwd(q, kv_all[:, :h], kv_all[:, h:], plan, scale, 0.0, False)
    times["fused_kv"] = time_cuda_ms(lambda: runtime._fused_kv(k, v), warmup, repeat)
    times["kernel_fwd"] = time_cuda_ms(
        lambda: mod.fwd(q, kv_all[:, :h], kv_all[:, h:], plan, scale, 0.0, False), warmup, repeat)
    times["kernel_bwd"] = time_cuda_ms(
        lambda: mod.bwd(dout, q, kv_all[:, :h], kv_all[:, h:], out, lse, plan, scale, 0.0, False),
        warmup, repeat)
    lay = meta.fused_layout

    def own_copies():  # the own KV's copies into the fused buffer (what the cut by keys skips)
        for src, dst, m in lay.own_copies:
            kv_all[dst:dst + m, :h] = k[src:src + m]
            kv_all[dst:dst + m, h:] = v[src:src + m]
    times["own_copies"] = time_cuda_ms(own_copies, warmup, repeat)
    if meta.host.num_slices:  # the own keys' kernel alone, on k and v in place
        times["host_kernel_fwd"] = time_cuda_ms(
            lambda: mod.fwd(q, k, v, meta.host.plan, scale, 0.0, False), warmup, repeat)
    recv = meta.stages[0].cast.recv_seqlen
    partial = torch.randn(recv, 2 * h, D, device=q.device, dtype=q.dtype)
    acc = torch.zeros(k.shape[0], 2 * h, D, device=q.device, dtype=torch.float32)
    times["group_reduce"] = time_cuda_ms(lambda: runtime._reduce(partial, acc, 0).wait(),
                                         warmup, repeat)
    return times


def _backward_three_ways(strategy: MagiAttention, q, k, v, dout, warmup: int, repeat: int
                         ) -> dict[str, float]:
    """The one backward timed as the CP runner times it (autograd.grad on a kept graph, CUDA
    events, 300 ms of warm-up), as ``DistAttnRuntime.backward`` called directly, and as the
    key's cut timing times it (``_Clock``: wall time of back-to-back calls, the slowest rank's):
    where the runner's row and the key's ``cut_ms`` disagree, which of the two ways moves."""
    runtime, device = strategy.key.runtime, q.device
    agree = agreed_count(runtime.group, device)
    out, lse, saved = runtime.forward_saving(q, k, v)
    direct = lambda: runtime.backward(dout, q, k, v, out, lse, saved)  # noqa: E731
    times = {"runner_bwd": time_cuda_ms(timed_call(strategy, (q, k, v, dout), "bwd"), warmup,
                                        repeat, 300.0, agree),
             "runtime_bwd": time_cuda_ms(direct, warmup, repeat, 300.0, agree)}
    clock = _Clock(runtime.group, device, 2)
    times["clock_bwd_first"] = clock.seconds(direct, "bwd") * 1e3
    times["clock_bwd"] = min(clock.seconds(direct, "bwd") for _ in range(3)) * 1e3
    return times


def _received(strategy: MagiAttention) -> str:
    """The tokens this rank receives over all stages (the cast's size)."""
    stages = strategy.key.runtime.meta.stages
    return f"recv_tokens={sum(s.cast.recv_seqlen for s in stages)}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seqlen-per-gpu", type=int, default=16384)
    p.add_argument("--masks", nargs="+", default=["causal_document", "full_document"])
    p.add_argument("--backend", default="fa4")
    p.add_argument("--dispatch-alg", default="auto")
    p.add_argument("--chunk-size", type=int, default=None)
    p.add_argument("--cut", default="auto")
    p.add_argument("--balance", default="timed",
                   help="as the benchmark's magi (configs/cp/magi.yaml)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"{args.backend}_{args.dispatch_alg}" + (f"_c{args.chunk_size}" if args.chunk_size else "")
    path = args.out / f"magi_profile_cp{world}_{tag}_rank{rank}.csv"
    seqlen = args.seqlen_per_gpu * world
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for name in args.masks:
            mask = cell_mask(MaskChoice(label=name, name=name, params={}), seqlen, DataConfig(),
                             HKV)
            strategy = MagiAttention(mask, None, num_heads_q=HQ, num_heads_kv=HKV,
                                     kernel=LocalKernel(args.backend),
                                     dispatch_alg=args.dispatch_alg,
                                     chunk_size=args.chunk_size, cut=args.cut,
                                     balance=args.balance)
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v, dout = (torch.randn(seqlen, h, D, device="cuda", generator=g).bfloat16()
                             for h in (HQ, HKV, HKV, HQ))
            q, k, v, dout = (strategy.shard(t) for t in (q, k, v, dout))
            times = _pieces(strategy, q, k, v, dout, args.warmup, args.repeat)
            for piece, ms in times.items():
                writer.writerow(dict(mask=name, backend=args.backend, cp_size=world, rank=rank,
                                     piece=piece, ms=f"{ms:.4f}",
                                     notes=f"{strategy.notes} {_received(strategy)}"))
            f.flush()
            print(f"rank {rank} {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in times.items()),
                  flush=True)
            # collective: every rank steps and writes its own tables
            suffix = "" if rank == 0 else f"_rank{rank}"
            table = args.out / f"magi_profile_cp{world}_{tag}_{name}{suffix}.txt"
            syncs = profile_steps(_train_step(strategy, q, k, v, dout), table)
            print(f"rank {rank} {name}: {syncs} device-to-host syncs per step", flush=True)
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
