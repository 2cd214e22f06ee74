"""The 2-rank gloo harness tells a rank that died in teardown, after both wrote their findings
(a warning; the findings still count) from one that died in its check (the test fails)."""
import os
import signal

import pytest
import torch.multiprocessing as mp

from ._cp2_gloo import run_on_two_ranks


def _die():
    """Death by a signal (SIGTERM: no core file), as gloo's aborts are."""
    os.kill(os.getpid(), signal.SIGTERM)


def _finds_then_dies_in_teardown(rank):
    if rank == 1:
        os._exit = lambda code: _die()  # the harness's last step, in this child only
    return [f"rank {rank} found this"]


def _dies_in_check(rank):
    if rank == 1:
        _die()
    return []


def test_a_death_in_teardown_warns_and_keeps_the_findings():
    with pytest.warns(UserWarning, match="died in teardown"):
        found = run_on_two_ranks(_finds_then_dies_in_teardown)
    assert found == "rank 0 found this\nrank 1 found this"


def test_a_death_in_the_check_fails():
    with pytest.raises(mp.ProcessExitedException, match="signal SIGTERM"):
        run_on_two_ranks(_dies_in_check)
