"""FLOPs, TFLOPs/s and timing helpers of bench/metrics.py, against numbers worked out by hand."""
import math
import time

import pytest
import torch

from bench.metrics import attn_flops, peak_mem_gb, reset_peak_mem, tflops_per_s, time_cuda_ms

S, HEADS, HEAD_DIM = 4096, 64, 128
CAUSAL_AREA = S * (S + 1) // 2  # 8,390,656 cells


def test_causal_fwd_flops_by_hand():
    # 4 * 8,390,656 * 64 * 128 = 274,945,015,808
    assert attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM) == 274_945_015_808
    assert attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, batch=2) == 2 * 274_945_015_808


def test_bwd_and_fwd_bwd_ratios():
    fwd = attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, direction="fwd")
    assert attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, direction="bwd") == 687_362_539_520  # 2.5 * fwd
    assert attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, direction="bwd") == 2.5 * fwd
    assert attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, direction="fwd_bwd") == 3.5 * fwd


def test_tflops_per_s_by_hand():
    # 274,945,015,808 FLOPs in 1.0 ms -> 274.945015808 TFLOPs/s; per GPU over cp_size 8 -> /8.
    assert tflops_per_s(274_945_015_808, 1.0) == pytest.approx(274.945015808)
    assert tflops_per_s(274_945_015_808, 2.0, cp_size=8) == pytest.approx(274.945015808 / 16)


@pytest.mark.parametrize("direction", ["forward", "fwd+bwd", ""])
def test_unknown_direction_raises(direction):
    with pytest.raises(ValueError, match="direction"):
        attn_flops(CAUSAL_AREA, HEADS, HEAD_DIM, direction=direction)


def test_negative_area_raises():
    with pytest.raises(ValueError, match="area"):
        attn_flops(-1, HEADS, HEAD_DIM)


@pytest.mark.parametrize("runtime_ms", [0.0, -1.0])
def test_nonpositive_runtime_raises(runtime_ms):
    with pytest.raises(ValueError, match="runtime_ms"):
        tflops_per_s(1e12, runtime_ms)


def test_bad_cp_size_raises():
    with pytest.raises(ValueError, match="cp_size"):
        tflops_per_s(1e12, 1.0, cp_size=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_time_cpu_fallback_returns_positive_median():
    calls = []

    def work():
        calls.append(None)
        time.sleep(0.002)

    runtime_ms = time_cuda_ms(work, warmup=2, repeat=5)
    assert len(calls) == 7
    assert 2.0 <= runtime_ms < 200.0


def test_warmup_ms_adds_untimed_calls_sized_from_one_call():
    calls = []

    def work():
        calls.append(time.perf_counter())
        time.sleep(0.002)

    time_cuda_ms(work, warmup=1, repeat=3, warmup_ms=40)
    # 1 counted warm-up, then one sizing call of ~2 ms and enough more to fill ~40 ms, then 3;
    # the count follows the sizing call's own duration (longer on a loaded machine)
    extra = len(calls) - 1 - 3
    sizing_ms = (calls[2] - calls[1]) * 1e3
    assert 2 <= extra <= 21 and abs(extra - math.ceil(40 / sizing_ms)) <= 2, (extra, sizing_ms)
    # (no wall-clock bound on the warm-up: on a loaded machine one slow sizing call makes the
    # later, faster calls fall short of warmup_ms; the count above is the contract)


def test_warmup_ms_count_goes_through_agree():
    calls, asked = [], []

    def agree(n):
        asked.append(n)
        return 7  # e.g. the max over a process group

    time_cuda_ms(lambda: calls.append(None), warmup=0, repeat=2, warmup_ms=1.0, agree=agree)
    assert len(asked) == 1 and len(calls) == 1 + 7 + 2



@pytest.mark.parametrize("collect", [True, False])
def test_garbage_is_collected_before_the_first_call_unless_asked_not_to(collect,
                                                                         leftover_garbage):
    # garbage left by what ran before (another strategy's backward) must not be collected
    # among the calls being timed; with the automatic collector off, only time_cuda_ms frees it
    seen_at_first_call = []
    time_cuda_ms(lambda: seen_at_first_call.append(leftover_garbage()), warmup=1, repeat=2,
                 collect=collect)
    assert seen_at_first_call[0] == collect


@pytest.mark.parametrize("warmup, repeat, name", [(-1, 3, "warmup"), (0, 0, "repeat")])
def test_time_bad_counts_raise(warmup, repeat, name):
    with pytest.raises(ValueError, match=name):
        time_cuda_ms(lambda: None, warmup=warmup, repeat=repeat)


def test_negative_warmup_ms_raises():
    with pytest.raises(ValueError, match="warmup_ms"):
        time_cuda_ms(lambda: None, warmup=0, repeat=1, warmup_ms=-1.0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU behaviour")
def test_peak_mem_is_none_on_cpu():
    reset_peak_mem()
    assert peak_mem_gb() is None
    assert peak_mem_gb("cpu") is None


@pytest.mark.gpu
def test_peak_mem_counts_an_allocation_on_gpu():
    reset_peak_mem()
    x = torch.empty(2**30 // 4, dtype=torch.float32, device="cuda")  # 1 GiB
    assert peak_mem_gb() >= 1.0
    del x


@pytest.mark.gpu
def test_time_cuda_events_positive():
    a = torch.randn(1024, 1024, device="cuda")
    assert time_cuda_ms(lambda: a @ a, warmup=2, repeat=5) > 0


def test_host_us_per_call_times_each_call_on_the_host():
    from bench.metrics import host_us_per_call
    calls = []
    us = host_us_per_call(lambda: (calls.append(1), time.sleep(0.002)), calls=5)
    assert len(calls) == 5
    assert 2000 <= us < 200000, us


def test_host_profile_calls_fn_and_names_it_under_each_order():
    from bench.metrics import host_profile
    calls = []

    def probe_target():
        calls.append(1)

    text = host_profile(probe_target, calls=4, top=5, orders=("tottime", "cumulative"))
    assert len(calls) == 4
    assert text.count("probe_target") == 2  # one listing per order
    assert "internal time" in text and "cumulative time" in text
