"""api._tune_balance.fastest: how each rank's kernel step is timed for the timed balance. One
step timed alone spreads by up to 10% on a GPU, so every layout of a key must be
judged by one recipe's minimum: a layout timed once lost to one whose fastest of four timings
was kept."""
import pytest

from magi_attention.api import _tune_balance as tune


class _Timer:
    """timed(step, calls) -> ``per_call`` seconds, recording the calls of each timing."""

    def __init__(self, per_call: float) -> None:
        self.per_call, self.timings, self.steps = per_call, [], 0

    def step(self) -> None:
        self.steps += 1

    def __call__(self, step, calls: int) -> float:
        for _ in range(calls):
            step()
        self.timings.append(calls)
        return self.per_call


@pytest.mark.parametrize("per_call", [0.01, 0.5])  # a short step and one past LONG_STEP_S
def test_the_first_timing_picks_the_recipe(per_call):
    timer = _Timer(per_call)
    seconds, long = tune.fastest(timer.step, timer)
    assert seconds == per_call and long == (per_call >= tune.LONG_STEP_S)
    more = [1] * (tune.LONG_ROUNDS - 1) if long else [tune.CALLS] * tune.ROUNDS
    assert timer.timings == [1, *more] and len(timer.timings) >= 2  # never one timing alone
    assert timer.steps == 1 + sum(timer.timings)  # the warm call first


@pytest.mark.parametrize("long", [False, True])
def test_a_given_recipe_is_kept_whatever_the_step_takes(long):
    """A re-cut's step past LONG_STEP_S is timed as the first layout's short one was, and the
    other way round."""
    timer = _Timer(0.5 if not long else 0.01)
    assert tune.fastest(timer.step, timer, long) == (timer.per_call, long)
    assert len(timer.timings) == (tune.LONG_ROUNDS if long else 1 + tune.ROUNDS)


def test_the_fastest_timing_is_kept():
    times = iter([0.03, 0.02, 0.025, 0.04])
    assert tune.fastest(lambda: None, lambda step, calls: next(times)) == (0.02, False)


def test_every_layout_is_timed_by_the_first_layouts_recipe(monkeypatch):
    """_rank_seconds hands each stage mask the recipe its first timing chose to every later
    layout's timing (the steps here: the first layout short, the next ones long)."""
    from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_dispatch
    from magi_attention.meta.solver import solve_for_dispatch
    from magi_attention.testing.masks import causal

    seqlen = 4096
    slices = SliceArray.from_slices(causal(seqlen))
    solved = solve_for_dispatch(slices, solve_dispatch(slices, seqlen, 2, 256, "balanced_runs"),
                                AttnShape(8, 2, 64), OverlapConfig())
    asked = []

    def step_seconds(module, attn, shape, device, dtype, scale, softcap, long):
        asked.append(long)
        return (0.05 if not asked[:-1] else 0.5), (False if long is None else long)
    monkeypatch.setattr(tune, "_step_seconds", step_seconds)
    monkeypatch.setattr(tune, "_gathered", lambda value, group, device: [value])
    measure = tune._rank_seconds(None, 0, None, "reference", AttnShape(8, 2, 64), None, None, 0.0)
    assert measure(solved) == [0.05] and measure(solved) == measure(solved) == [0.5]
    assert asked == [None, False, False]


def test_a_key_built_again_reuses_the_timed_layout(monkeypatch):
    """resolve_balance times a signature once per group: the second key of the same signature
    gets the layout and the times of the first without timing (the timing replaced here)."""
    import torch

    from magi_attention.api._timed_choices import GroupChoices
    from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_dispatch
    from magi_attention.meta.solver import MagiMeta, solve_for_dispatch
    from magi_attention.testing.masks import causal

    seqlen, shape, overlap = 4096, AttnShape(8, 2, 64), OverlapConfig(balance="timed")
    slices = SliceArray.from_slices(causal(seqlen))
    first = solve_for_dispatch(slices, solve_dispatch(slices, seqlen, 2, 256, "balanced_runs"),
                               shape, overlap)
    meta = MagiMeta(first.dispatch, first.table, first.runtime(0), first.stage_plan,
                    "balanced_runs")
    timings = []

    def rebalance(slices, solved, solve, measure):
        timings.append(1)
        return solved, [[1.0, 0.9]]
    monkeypatch.setattr(tune, "_CHOSEN", GroupChoices())
    monkeypatch.setattr(tune, "rebalance_runs", rebalance)
    monkeypatch.setattr(tune, "_rank_seconds", lambda *args: None)
    cuda = torch.device("cuda", 0)  # never touched: the timing is replaced
    got = [tune.resolve_balance(overlap, meta, slices, shape, None, 0, cuda, "triton",
                                torch.bfloat16, None, 0.0, ("mask", seqlen)) for _ in range(2)]
    assert timings == [1]
    assert all(m.dispatch.chunks_of(0) == first.dispatch.chunks_of(0) for m, _ in got)
    assert got[0][1] == got[1][1] == [[1.0, 0.9]]


def test_garbage_is_collected_before_the_warm_step(leftover_garbage):
    seen = []
    tune.fastest(lambda: seen.append(leftover_garbage()), lambda step, calls: 0.01)
    assert seen == [True]
