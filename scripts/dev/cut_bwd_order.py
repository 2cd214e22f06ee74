"""Does the cut backward hide its reduce? The two orders of MagiAttention's backward cut by keys,
timed interleaved on one cell (notes/magi_cp.md "Session 34"):

- ``reduce_first`` (the library's since session 34): the received keys' kernel, the reduce of
  their dK/dV started, then the own keys' kernel while it travels;
- ``reduce_last`` (before): the own keys' kernel, the received keys', then the reduce.

Both compute the same sums in the same order (bitwise equal gradients; the gloo test checks the
library's). The backward is the runner's (autograd over one forward); each round times both
orders' backward (median of ``hardware.repeat`` after the warm-up, the slowest rank's), and each
order's rounds are summarised by their median.

    torchrun --nproc-per-node 2 scripts/dev/cut_bwd_order.py --out $OUT --rounds 5 -- \\
        experiment=cp_h200x2 hardware=h200 local_kernel=fa4 \\
        'mask=[causal_document,full_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]'

Rows: ``cut_bwd_order.csv`` (mask, order, round, ms); a summary on rank 0's stdout.
"""
from __future__ import annotations

import statistics
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cp_ab import build, load_config, parse_args, run  # noqa: E402

from bench.cp.runner import agreed_count, group_max, timed_call  # noqa: E402
from bench.metrics import time_cuda_ms  # noqa: E402


def reduce_last(self, dout, q, k, v, out, lse, backend: str, recv=None):
    """The cut backward before session 34: own keys, received keys, then the reduce."""
    h = k.shape[1]
    if recv is None:
        recv = self._issue(self._cast((k, v), 0)).wait()
    dq, dk, dv = self._bwd(dout, q, k, v, out, lse, self.meta.host, backend)
    win = self.meta.stages[0].window
    if win is None:
        dq_r, partial = None, torch.zeros_like(recv)
    else:
        rows = slice(win.start, win.end)
        dq_r, dk_r, dv_r = self._bwd(dout[rows], q[rows], recv[:, :h], recv[:, h:], out[rows],
                                     lse[rows], win.attn, backend)
        partial = torch.cat([dk_r, dv_r], dim=1)
    if dq is None:
        dq = torch.zeros_like(q)
    if dq_r is not None:
        dq[win.start:win.end].add_(dq_r)
    return (dq, *self._reduce_into_own(partial, lambda: (dk, dv))())


def _mask_rounds(config, choice, rounds, write, device, comm_device, group) -> dict:
    hw = config.hardware
    _, built = build(config, device, group, choice)
    (strategy, local), = built
    runtime = strategy.key.runtime
    if runtime.cut != frozenset({"bwd"}):
        raise SystemExit(f"{choice.label}: the backward is not cut ({sorted(runtime.cut)}); "
                         "pass cp.magi.knobs.cut=bwd")
    call = timed_call(strategy, local, "bwd")
    agree = agreed_count(group, comm_device)
    orders = {"reduce_first": None, "reduce_last": types.MethodType(reduce_last, runtime)}
    times: dict = {}
    for r in range(rounds):
        for order, method in orders.items():
            if method is None:
                runtime.__dict__.pop("_cut_backward", None)  # the class's (the library's)
            else:
                runtime._cut_backward = method
            ms = group_max(time_cuda_ms(call, hw.warmup, hw.repeat, hw.warmup_ms, agree), group,
                           comm_device)
            times.setdefault((choice.label, order), []).append(ms)
            write([choice.label, order, r, f"{ms:.4f}"])
    runtime.__dict__.pop("_cut_backward", None)
    return times


def main(argv=None) -> None:
    args = parse_args(argv, __doc__.splitlines()[0])
    config = load_config([*args.overrides, "cp=[magi]", "cp.magi.knobs.cut=bwd"])
    times = run(config, args.rounds, args.out, _mask_rounds, "cut_bwd_order",
                ("mask", "order", "round", "ms"))
    if times:  # rank 0
        for mask in dict.fromkeys(m for m, _ in times):
            first, last = (statistics.median(times[(mask, o)])
                           for o in ("reduce_first", "reduce_last"))
            print(f"{mask} bwd: reduce_first {first:.3f} ms, reduce_last {last:.3f} ms "
                  f"(median of {len(times[(mask, 'reduce_first')])} rounds); "
                  f"last / first {last / first:.3f}")


if __name__ == "__main__":
    main()
