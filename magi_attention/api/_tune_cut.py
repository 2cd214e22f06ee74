"""Which directions of the fused stage run cut by keys, decided once at key time.

Cut by keys, a direction runs one kernel over the rank's own keys (the forward's while the KV
cast is in flight) and one over the received keys, merged by lse (forward) or summed (dq);
whole, it runs one kernel over the fused buffer of both. Which is faster depends on the kernel,
not on the communication the cost model sees: on 2 H200s the cut
forward was 3% faster with FA4 on full at 64k tokens a rank and 6% with Triton on causal, the
cut backward 6% faster with Triton on full at 16k and 3-5% slower on causal. So each direction is
timed both ways on the key's own shapes, and every rank keeps the choice of the slowest rank.

The timing costs a few forward and backward steps of each way, in three rounds (a few seconds
at 16k tokens a rank, tens of seconds at 64k), so it is asked for (``OverlapConfig(cut="auto")``), not the default, and its
choice is kept per process for the same mask and shapes: a key built again for a mask already
timed costs nothing more. Where every batch brings a new mask, time one representative key and
pass its ``key.runtime.cut`` on as a fixed choice.
"""
from __future__ import annotations

import math
import time

import torch
import torch.distributed as dist

from ..functional import DistAttnRuntime
from ..meta import OverlapConfig
from ..timing import settle
from ._timed_choices import GroupChoices

CUTS = {"none": frozenset(), "fwd": frozenset({"fwd"}), "bwd": frozenset({"bwd"}),
        "both": frozenset({"fwd", "bwd"})}
# keep the whole kernel unless the cut is faster by more than this, a direction (timing
# noise). Forward 1%: 2% was too close to a real gain. FA4's cut forward on full at 64k a GPU
# (cp 2) beat the whole one by 2.1-3.8% in five keys on H200 and H100 pairs, and one key timed
# it 1.99% faster, kept it whole, and lost 3.8% to the rings in the bench; whole and cut are
# timed in turn inside one key, so a drift between keys (up to 1.3%) does not enter their
# ratio. Against runs that fix the cut, above 1% the cut forward gained 2.7-7.5% in the bench,
# on six cells below it at most 0.5% (and lost up to 8.5%). Backward 2%: at cp 4 two launches'
# keys chose differently and the cut backward ran 1.4% slower than the other launch's whole
# one, and identical keys timed 1.3% apart, so less than 2% is launch noise for the backward.
MIN_GAIN = {"fwd": 0.01, "bwd": 0.02}
# timed choices per process group, by signature (mask, shapes, backend): (cut, cut_seconds)
_CHOSEN = GroupChoices()


def resolve_cut(overlap: OverlapConfig, runtime: DistAttnRuntime, device: torch.device,
                num_heads_q: int, num_heads_kv: int, head_dim: int, dtype: torch.dtype,
                signature: tuple = (), iters: int = 2) -> frozenset[str]:
    """The directions to cut: ``overlap.cut`` itself, or for "auto" the timed choice (on CUDA;
    kept under ``signature``, which must name the mask and everything else the key was built
    from, alike on every rank); nothing where there is no fused stage or it is cut by rows.
    Every rank decides alike (the fused stage is chosen for the group; the row cut, which is
    per rank, only where ``overlap.split`` asks for it), so the timing's collectives match."""
    if runtime.meta.fused is None or overlap.split_directions:
        return frozenset()
    if overlap.cut != "auto":
        return CUTS[overlap.cut]
    if device.type != "cuda":
        return frozenset()  # no timer worth trusting: the fused stage runs whole
    key = (signature, str(device), dtype, num_heads_q, num_heads_kv, head_dim)

    def timed() -> tuple[frozenset[str], dict]:
        cut = _timed_cut(runtime, device, num_heads_q, num_heads_kv, head_dim, dtype, iters)
        return cut, runtime.cut_seconds
    cut, runtime.cut_seconds = _CHOSEN.get_or_time(runtime.group, key, timed)
    return cut


# the ways timed: whole (both directions), the cut forward (its fused buffer still built for a
# whole backward), the cut backward
VARIANTS = (("none", ("fwd", "bwd")), ("fwd", ("fwd",)), ("bwd", ("bwd",)))
# rounds of the three, in turn; each way keeps its fastest round, so a moment's clocks (another
# job, a drift) decide neither way alone: on 2 H200s (Triton, 64k tokens a rank) one pass kept
# the forward whole where later timings saw the cut 5-9% faster.
ROUNDS = 3


def shard_inputs(runtime, device, num_heads_q, num_heads_kv, head_dim, dtype):
    """Random q, k, v, dout of ``runtime``'s shard (seeded: every timing sees the same)."""
    g = torch.Generator(device=device).manual_seed(0)
    make = lambda n, h: torch.randn(n, h, head_dim,  # noqa: E731
                                    device=device, dtype=dtype, generator=g)
    n_q = runtime.meta.shard_seqlen
    # a cross-attention key's k, v shards have their own length (a meta without one: q's)
    n_kv = getattr(runtime.meta, "shard_seqlen_kv", n_q)
    return make(n_q, num_heads_q), make(n_kv, num_heads_kv), make(n_kv, num_heads_kv), \
        make(n_q, num_heads_q)


def _timed_cut(runtime, device, num_heads_q, num_heads_kv, head_dim, dtype, iters):
    q, k, v, dout = shard_inputs(runtime, device, num_heads_q, num_heads_kv, head_dim, dtype)
    clock = _Clock(runtime.group, device, iters)
    rounds: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(ROUNDS):
            for name, timed in VARIANTS:
                runtime.cut = CUTS[name]
                fwd = lambda: runtime.forward_saving(q, k, v)  # noqa: E731
                out, lse, saved = fwd()
                bwd = lambda: runtime.backward(dout, q, k, v, out, lse, saved)  # noqa: E731
                for d in timed:
                    rounds.setdefault((name, d), []).append(
                        clock.seconds(fwd if d == "fwd" else bwd, (name, d)))
                del out, lse, saved
    finally:
        runtime.cut = frozenset()
    times = {way: min(seconds) for way, seconds in rounds.items()}
    runtime.cut_seconds = {d: (times["none", d], times[d, d]) for d in ("fwd", "bwd")}
    return choose_cut(runtime.cut_seconds)


def choose_cut(seconds: dict[str, tuple[float, float]]) -> frozenset[str]:
    """The directions whose cut time beats the whole one by more than their MIN_GAIN, from
    ``{direction: (whole, cut)}``."""
    return frozenset(d for d, (whole, cut) in seconds.items()
                     if cut < whole * (1 - MIN_GAIN[d]))


class _Clock:
    """Seconds per call of a collective step, the same on every rank (the slowest rank's).
    The ranks start each timing together (a barrier after the warm call, whose compiles may
    finish at different times on different ranks: a rank that starts early would time its
    wait for the other), and every rank runs the same number of calls (collectives must
    match): enough for ``MIN_SECONDS`` by a first estimate, at least ``min_iters``."""

    # a timing lasts this long at least: at 0.05 s (four 15 ms forwards, Triton causal 16k a GPU,
    # cp 2 on 2 H200s) the cut and whole forwards' times moved by 4% from launch to launch,
    # more than the cut's gain (2-4% when interleaved), and the key chose either way; a call
    # longer than this still runs ``min_iters`` times
    MIN_SECONDS = 0.2
    MAX_ITERS = 50

    def __init__(self, group, device: torch.device, min_iters: int) -> None:
        self.group, self.device, self.min_iters = group, device, min_iters
        self._iters: dict = {}

    def seconds(self, fn, label) -> float:
        """Seconds per call of ``fn``; its first timing under ``label`` warms it and sets how
        many calls each of its timings makes. Each timing settles first (``settle``: a
        collection and at least 100 ms idle), as the benchmark's do: on 2 H200s a key built
        right after another key's timings timed the identical whole forward 5% slower without
        it (Triton causal 16k a GPU, cp 2: 16.52 against 15.71 ms, and chose the cut where the
        first did not)."""
        settle()
        n = self._iters.get(label)
        if n is None:
            fn()  # warm: compiles, allocator
            estimate = self._max(self._timed(fn, 1))
            n = max(self.min_iters,
                    min(self.MAX_ITERS, math.ceil(self.MIN_SECONDS / max(estimate, 1e-6))))
            self._iters[label] = n
        return self._max(self._timed(fn, n))

    def _timed(self, fn, n: int) -> float:
        self._sync()
        dist.barrier(group=self.group)
        self._sync()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        self._sync()
        return (time.perf_counter() - start) / n

    def _max(self, value: float) -> float:
        on = self.device if dist.get_backend(self.group) == "nccl" else "cpu"
        t = torch.tensor([value], dtype=torch.float64, device=on)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return t.item()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
