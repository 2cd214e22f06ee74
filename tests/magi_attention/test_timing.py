"""magi_attention.timing.settle: what precedes every timing (the benchmark's, the key's)."""
import pytest

import magi_attention.timing as timing


@pytest.mark.parametrize("cuda", [False, True])
def test_settle_collects_then_idles_to_its_minimum_on_cuda_only(monkeypatch, leftover_garbage,
                                                                  cuda):
    """The pause is what removed the slow state of a timing right after another key's (a 100 ms idle; the collection alone
    found no garbage): a collection quicker than min_s still idles the rest of it on CUDA; the
    CPU path (tests, the reference kernel) does not wait. min_s is far longer than any
    collection here, so the wait is the rest whatever this process's heap."""
    slept = []
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(timing.time, "sleep", slept.append)
    timing.settle(30.0)
    assert leftover_garbage()
    if cuda:
        assert len(slept) == 1 and 0.0 < slept[0] <= 30.0
    else:
        assert slept == []
