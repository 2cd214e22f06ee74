"""api._tune_balance.fastest: how each rank's kernel step is timed for the timed balance. Every
layout must be judged by the same recipe's minimum: a lone first timing after the warm call ran
10-20% slow on GPUs (session 38), and a layout timed once then lost to one timed in rounds."""
import pytest

from magi_attention.api import _tune_balance as tune


class _Timer:
    """timed(step, calls): seconds a call from a script (the first timing cold), recording the
    calls of each timing; steps counted."""

    def __init__(self, per_call: float, cold: float) -> None:
        self.per_call, self.cold, self.timings, self.steps = per_call, cold, [], 0

    def step(self) -> None:
        self.steps += 1

    def __call__(self, step, calls: int) -> float:
        for _ in range(calls):
            step()
        self.timings.append(calls)
        return self.per_call * (self.cold if len(self.timings) == 1 else 1.0)


@pytest.mark.parametrize("per_call", [0.01, 0.5])  # a short step and one past LONG_STEP_S
def test_a_cold_first_timing_is_never_the_result(per_call):
    timer = _Timer(per_call, cold=1.2)
    assert tune.fastest(timer.step, timer) == pytest.approx(per_call)
    long = per_call >= tune.LONG_STEP_S
    rounds = tune.LONG_ROUNDS if long else 1 + tune.ROUNDS
    assert len(timer.timings) == rounds >= 2
    assert timer.timings[1:] == [1 if long else tune.CALLS] * (rounds - 1)
    assert timer.steps == 1 + sum(timer.timings)  # the warm call first


def test_the_fastest_timing_is_kept():
    times = iter([0.03, 0.02, 0.025, 0.04])
    assert tune.fastest(lambda: None, lambda step, calls: next(times)) == 0.02
