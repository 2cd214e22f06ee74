"""MagiAttention on several GPUs (NCCL): bf16 equality check, then a short throughput benchmark.

    torchrun --nproc-per-node=N tools/device/magi_gpu_check.py --out $OUT/magi_gpu_check.txt

Part 1 (check): for each mask of KERNEL_MASK_NAMES at a small S and each dispatch algorithm,
undispatch(calc_attn(dispatch(q, k, v))) and the undispatched dq, dk, dv in bf16 are compared
with fp64 dense attention; the error must stay within 2x the error of the single-device FFA
kernel in bf16 (same backend) plus a small atol.
Part 2 (bench): full and causal_document at --seqlen-per-gpu tokens per GPU: fwd and bwd
runtime (median of --repeat, slowest rank) and TFLOPs/s/GPU.
The report (text, plus a .json next to it) is rewritten after every result, so a failure or a
timeout in the benchmark keeps what the check found. Smoke test on CPU:
    torchrun --nproc-per-node=2 tools/device/magi_gpu_check.py --device cpu --check-seqlen 256
        --seqlen-per-gpu 256 --out /tmp/magi.txt
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import traceback

import torch
import torch.distributed as dist

from bench.data import sample_doc_lens
from bench.masks import KERNEL_MASK_NAMES, build_mask
from bench.metrics import attn_flops, tflops_per_s
from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch
from magi_attention.common import slices_to_tensors, to_dense
from magi_attention.functional import flex_flash_attn_func
from magi_attention.functional import resolve_backend
from magi_attention.meta import DISPATCH_ALGORITHMS
from magi_attention.testing import dense_attention


class Report:
    """Rank 0 keeps the rows and rewrites the text and json files after each one."""

    def __init__(self, path: str, header: dict) -> None:
        self.path, self.header, self.rows = path, header, []
        self.write()

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.write()

    def write(self) -> None:
        if dist.get_rank() != 0:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            f.write("".join(f"# {k}: {v}\n" for k, v in self.header.items()))
            for row in self.rows:
                f.write("  ".join(f"{k}={_fmt(v)}" for k, v in row.items()) + "\n")
        with open(os.path.splitext(self.path)[0] + ".json", "w") as f:
            json.dump({"header": self.header, "rows": self.rows}, f, indent=1)


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def check(args, device, report: Report) -> bool:
    """bf16 CP result vs fp64 dense, bounded by the single-device bf16 error."""
    seqlen, cp_size = args.check_seqlen, dist.get_world_size()
    heads, head_dim = (args.check_heads_q, args.check_heads_kv), args.check_head_dim
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(seqlen, h, head_dim, generator=gen).to(device)
               for h in (heads[0], heads[1], heads[1]))
    dout = torch.randn(seqlen, heads[0], head_dim, generator=gen).to(device)
    doc_lens = sample_doc_lens(seqlen, seed=0)
    all_ok = True
    for name in KERNEL_MASK_NAMES:
        params = {"window": seqlen // 8} if "window" in name else {}
        if name == "block_causal_document":
            params = {"block_size": max(seqlen // 32, 16)}
        mask = build_mask(name, seqlen, doc_lens=doc_lens, seed=0, **params)
        ranges = slices_to_tensors(mask.slices, device)
        ref_in = [t.double().requires_grad_() for t in (q, k, v)]
        ref_out, _ = dense_attention(*ref_in, to_dense(mask.slices, seqlen, device=device))
        ref = [ref_out.detach()] + list(torch.autograd.grad(ref_out, ref_in, dout.double()))
        base_in = [t.to(args.dtype).clone().requires_grad_() for t in (q, k, v)]
        base_out, _ = flex_flash_attn_func(*base_in, *ranges, backend=args.kernel_backend)
        base = [base_out.detach()] + list(torch.autograd.grad(base_out, base_in, dout.to(args.dtype)))
        base_err = [(b.double() - r).abs().max().item() for b, r in zip(base, ref)]
        for alg in DISPATCH_ALGORITHMS:
            row = {"part": "check", "mask": name, "algorithm": alg, "seqlen": seqlen}
            try:
                key = magi_attn_flex_key(*ranges, seqlen, *heads, head_dim, None, args.check_chunk,
                                         dispatch_alg=alg, num_stages=args.num_stages,
                                         backend=args.kernel_backend, dtype=args.dtype)
                local = [dispatch(t.to(args.dtype), key).detach().requires_grad_() for t in (q, k, v)]
                out_local, _ = calc_attn(*local, key)
                out_local.backward(dispatch(dout.to(args.dtype), key))
                got = [undispatch(out_local.detach(), key)] + [undispatch(t.grad, key) for t in local]
                errs = [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]
                ok = all(e <= 2 * b + args.atol for e, b in zip(errs, base_err))
                row.update({f"err_{n}": e for n, e in zip(("out", "dq", "dk", "dv"), errs)})
                row.update({f"single_gpu_err_{n}": e for n, e in zip(("out", "dq", "dk", "dv"),
                                                                    base_err)})
                row.update({"num_stages": key.num_stages, "ok": ok})
            except Exception as e:  # keep going: one failing mask must not hide the others
                ok = False
                row.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
                traceback.print_exc()
            all_ok &= ok
            report.add(row)
    return all_ok


def bench(args, device, report: Report) -> None:
    cp_size = dist.get_world_size()
    seqlen = args.seqlen_per_gpu * cp_size
    doc_lens = sample_doc_lens(seqlen, seed=0)
    heads, head_dim = (args.heads_q, args.heads_kv), args.head_dim
    for name in ("full", "causal_document"):
        row = {"part": "bench", "mask": name, "seqlen": seqlen, "cp_size": cp_size,
               "num_heads_q": heads[0], "num_heads_kv": heads[1], "head_dim": head_dim,
               "algorithm": args.bench_algorithm}
        try:
            mask = build_mask(name, seqlen, doc_lens=doc_lens, seed=0)
            t0 = time.perf_counter()
            key = magi_attn_flex_key(*slices_to_tensors(mask.slices), seqlen, *heads, head_dim, None,
                                     args.chunk_size, dispatch_alg=args.bench_algorithm,
                                     num_stages=args.num_stages, backend=args.kernel_backend,
                                     dtype=args.dtype)
            row["key_build_s"] = time.perf_counter() - t0
            row["num_stages"] = key.num_stages
            shard = seqlen // cp_size
            gen = torch.Generator(device=device).manual_seed(dist.get_rank())
            q, k, v = (torch.randn(shard, h, head_dim, device=device, dtype=args.dtype,
                                   generator=gen).requires_grad_() for h in (heads[0], heads[1], heads[1]))
            dout = torch.randn(shard, heads[0], head_dim, device=device, dtype=args.dtype,
                               generator=gen)
            fwd_ms, bwd_ms = _time_fwd_bwd(q, k, v, dout, key, args, device)
            row.update({"fwd_ms": fwd_ms, "bwd_ms": bwd_ms})
            row["fwd_tflops_per_gpu"] = tflops_per_s(attn_flops(mask.area, heads[0], head_dim),
                                                     fwd_ms, cp_size)
            row["bwd_tflops_per_gpu"] = tflops_per_s(
                attn_flops(mask.area, heads[0], head_dim, direction="bwd"), bwd_ms, cp_size)
            row["status"] = "ok"
        except torch.cuda.OutOfMemoryError as e:
            row.update({"status": "oom", "error": str(e)[:200]})
        except Exception as e:
            row.update({"status": "error", "error": f"{type(e).__name__}: {e}"})
            traceback.print_exc()
        report.add(row)


def _time_fwd_bwd(q, k, v, dout, key, args, device):
    """Median fwd and bwd ms on this rank, then the slowest rank's (all_reduce MAX)."""
    fwd, bwd = [], []
    for i in range(args.warmup + args.repeat):
        dist.barrier()
        t0 = _now(device)
        out, _ = calc_attn(q, k, v, key)
        t1 = _now(device)
        out.backward(dout)
        t2 = _now(device)
        if i >= args.warmup:
            fwd.append((t0, t1))
            bwd.append((t1, t2))
        q.grad = k.grad = v.grad = None
    _sync(device)
    med = lambda pairs: sorted(_elapsed_ms(a, b) for a, b in pairs)[len(pairs) // 2]
    times = torch.tensor([med(fwd), med(bwd)], dtype=torch.float64, device=device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    return times[0].item(), times[1].item()


def _now(device):
    if device.type == "cuda":
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    return time.perf_counter()


def _elapsed_ms(a, b) -> float:
    return a.elapsed_time(b) if hasattr(a, "elapsed_time") else (b - a) * 1e3


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="report path (.txt; a .json goes next to it)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--kernel-backend", default="auto")
    p.add_argument("--num-stages", type=int, default=None)
    p.add_argument("--check-seqlen", type=int, default=4096)
    p.add_argument("--check-chunk", type=int, default=128)
    p.add_argument("--check-heads-q", type=int, default=4)
    p.add_argument("--check-heads-kv", type=int, default=2)
    p.add_argument("--check-head-dim", type=int, default=64)
    p.add_argument("--atol", type=float, default=2e-3)
    p.add_argument("--seqlen-per-gpu", type=int, default=65536)
    p.add_argument("--chunk-size", type=int, default=2048)
    p.add_argument("--heads-q", type=int, default=32)
    p.add_argument("--heads-kv", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--bench-algorithm", default="min_heap", choices=list(DISPATCH_ALGORITHMS))
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--skip-bench", action="store_true")
    args = p.parse_args()
    args.dtype = torch.bfloat16 if args.device == "cuda" else torch.float32

    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda but no CUDA GPU is visible")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    device = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" \
        else torch.device("cpu")
    probe = torch.zeros(1, 1, args.head_dim, device=device, dtype=args.dtype)
    header = {"world_size": dist.get_world_size(), "device": torch.cuda.get_device_name(device)
              if device.type == "cuda" else platform.processor() or "cpu",
              "torch": torch.__version__, "dtype": str(args.dtype),
              "kernel_backend": f"{args.kernel_backend} -> "
                                f"{resolve_backend(args.kernel_backend, probe)}",
              "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    report = Report(args.out, header)
    ok = False
    try:
        ok = check(args, device, report)
        report.header["check"] = "PASS" if ok else "FAIL"
        report.write()
        if not args.skip_bench:
            bench(args, device, report)
    finally:
        dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
