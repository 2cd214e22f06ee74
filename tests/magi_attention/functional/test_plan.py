"""FlexAttnPlan: the mask prepared once. Every way of passing a mask gives the dense oracle's
result; range tensors find their plan by identity without reading them again; bad masks are
refused when the plan is built, naming the range."""
import random

import numpy as np
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors, to_dense
from magi_attention.functional import (FlexAttnPlan, clear_plan_caches, flex_attn_plan,
                                      flex_flash_attn_func)
from magi_attention.functional import _plans
from magi_attention.testing import dense_attention, random_qkv, random_slices


def _dense_out(q, k, v, slices):
    mask = to_dense(slices, q.shape[0], k.shape[0])
    return dense_attention(q, k, v, mask)[0]


@pytest.mark.parametrize("seed", range(4))
def test_every_form_of_the_mask_gives_the_dense_result(seed):
    rng = random.Random(seed)
    slices = random_slices(rng, 40, 56, rng.randint(1, 5))
    q, k, v = random_qkv(40, 56, 4, 2, 16, seed=seed, requires_grad=False)
    ref = _dense_out(q, k, v, slices)
    tensors = slices_to_tensors(slices)
    forms = [FlexAttnPlan.from_slices(slices, 40, 56),
             flex_attn_plan(slices, seqlen_q=40, seqlen_k=56),
             flex_attn_plan(*(t.tolist() for t in tensors), seqlen_q=40, seqlen_k=56),
             FlexAttnPlan.from_tensors(*tensors, 40, 56)]
    for plan in forms:
        out, _ = flex_flash_attn_func(q, k, v, plan)
        torch.testing.assert_close(out.double(), ref, atol=1e-4, rtol=1e-4)
    out, _ = flex_flash_attn_func(q, k, v, *tensors)
    torch.testing.assert_close(out.double(), ref, atol=1e-4, rtol=1e-4)


def test_same_tensors_find_their_plan_without_reading_them(monkeypatch):
    clear_plan_caches()
    q, k, v = random_qkv(32, 32, 2, 1, 8, requires_grad=False)
    tensors = slices_to_tensors([AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL)])
    flex_flash_attn_func(q, k, v, *tensors)
    # a second call must not build or read anything: make both fail loudly
    monkeypatch.setattr(_plans, "_by_content", lambda *a: pytest.fail("content lookup"))
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self: pytest.fail("read to host"))
    out, _ = flex_flash_attn_func(q, k, v, *tensors)
    monkeypatch.undo()
    torch.testing.assert_close(out.double(), _dense_out(q, k, v, [
        AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL)]), atol=1e-4, rtol=1e-4)


def test_in_place_change_of_the_ranges_is_seen():
    q, k, v = random_qkv(32, 32, 2, 1, 8, requires_grad=False)
    q_ranges, k_ranges, types = slices_to_tensors([AttnSlice.make(0, 32, 0, 32)])
    flex_flash_attn_func(q, k, v, q_ranges, k_ranges, types)
    types[0] = int(AttnMaskType.CAUSAL)  # bumps the version counter
    out, _ = flex_flash_attn_func(q, k, v, q_ranges, k_ranges, types)
    torch.testing.assert_close(out.double(), _dense_out(q, k, v, [
        AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL)]), atol=1e-4, rtol=1e-4)


def test_fresh_tensors_every_call_stay_exact():
    """New range tensors per call (their ids may repeat once the old ones are freed) must never
    be served another mask's plan."""
    q, k, v = random_qkv(48, 48, 2, 1, 8, requires_grad=False)
    rng = random.Random(3)
    for _ in range(30):
        slices = random_slices(rng, 48, 48, rng.randint(1, 4))
        out, _ = flex_flash_attn_func(q, k, v, *slices_to_tensors(slices))
        torch.testing.assert_close(out.double(), _dense_out(q, k, v, slices), atol=1e-4,
                                   rtol=1e-4)


def test_kernel_state_is_built_once_per_plan():
    plan = FlexAttnPlan.from_slices([AttnSlice.make(0, 16, 0, 16)], 16)
    calls = []
    assert plan.cached("x", lambda: calls.append(1) or 7) == 7
    assert plan.cached("x", lambda: calls.append(1) or 8) == 7
    assert calls == [1]
    assert plan.tensors("cpu") is plan.tensors("cpu")


@pytest.mark.parametrize("slices,seqlens,match", [
    ([AttnSlice.make(0, 20, 0, 8)], (16, 16), r"q_ranges\[0\] = \[0, 20\)"),
    ([AttnSlice.make(0, 8, 4, 40)], (16, 32), r"k_ranges\[0\] = \[4, 40\)"),
])
def test_out_of_bounds_ranges_are_refused_when_planned(slices, seqlens, match):
    with pytest.raises(ValueError, match=match):
        FlexAttnPlan.from_slices(slices, *seqlens)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="attn_type_map values"):
        FlexAttnPlan.from_tensors([[0, 4]], [[0, 4]], [7], 4, 4)
    with pytest.raises(ValueError, match="num_slices mismatch"):
        FlexAttnPlan.from_tensors([[0, 4]], [[0, 4], [0, 2]], [0], 4, 4)
    with pytest.raises(TypeError, match="q_ranges must be an integer tensor"):
        FlexAttnPlan.from_tensors(torch.zeros(1, 2), [[0, 4]], [0], 4, 4)
    with pytest.raises(ValueError, match="needs seqlen_q"):
        flex_attn_plan([AttnSlice.make(0, 4, 0, 4)])
    plan = FlexAttnPlan.from_slices([AttnSlice.make(0, 16, 0, 16)], 16)
    q, k, v = random_qkv(8, 16, 2, 1, 8, requires_grad=False)
    with pytest.raises(ValueError, match="seqlen_q=16"):
        flex_flash_attn_func(q, k, v, plan)
    q16 = torch.randn(16, 2, 8)
    with pytest.raises(ValueError, match="either a FlexAttnPlan"):
        flex_flash_attn_func(q16, k, v, plan, torch.zeros(1, 2, dtype=torch.int32))


def test_bounds_match_the_slice_geometry():
    slices = [AttnSlice.make(2, 9, 1, 12, t) for t in AttnMaskType]
    bounds = FlexAttnPlan.from_slices(slices, 16).bounds
    for s, row in zip(slices, bounds):
        lo = -(1 << 30) if s.lower_offset is None else s.lower_offset
        up = (1 << 30) if s.upper_offset is None else s.upper_offset
        assert row.tolist() == [2, 9, 1, 12, lo, up]
    assert np.array_equal(FlexAttnPlan.bounds_of(FlexAttnPlan.from_slices([], 4).slices),
                          np.zeros((0, 6)))


def test_inference_call_without_lse_keeps_the_output():
    """return_lse=False: same out, meta.lse None; a call that records autograd still has lse."""
    slices = [AttnSlice.make(0, 24, 0, 30, AttnMaskType.CAUSAL), AttnSlice.make(24, 40, 5, 56)]
    plan = flex_attn_plan(slices, seqlen_q=40, seqlen_k=56)
    q, k, v = random_qkv(40, 56, 4, 2, 16, seed=1, requires_grad=False)
    out, meta = flex_flash_attn_func(q, k, v, plan, return_lse=False)
    assert meta.lse is None
    torch.testing.assert_close(out.double(), _dense_out(q, k, v, slices), atol=1e-4, rtol=1e-4)
    q.requires_grad_(True)
    out_grad, meta_grad = flex_flash_attn_func(q, k, v, plan, return_lse=False)
    assert meta_grad.lse is not None and meta_grad.lse.shape == (40, 4)
    torch.testing.assert_close(out_grad.detach(), out)


@pytest.mark.parametrize("edit", ["copy_", "setitem"])
def test_a_plan_is_a_snapshot_of_the_tensors_it_was_built_from(edit):
    """Editing the source range tensors after planning changes neither what the plan computes
    nor what it reports: tensors() and host_lists() agree with the mask it was built for."""
    before = [AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL)]
    q_ranges, k_ranges, types = slices_to_tensors(before)
    plan = flex_attn_plan(q_ranges, k_ranges, types, seqlen_q=32, seqlen_k=32)
    q, k, v = random_qkv(32, 32, 2, 1, 8, requires_grad=False)
    first, _ = flex_flash_attn_func(q, k, v, plan)
    if edit == "copy_":
        q_ranges.copy_(torch.tensor([[8, 16]], dtype=torch.int32))
    else:
        types[0] = int(AttnMaskType.FULL)
    again, _ = flex_flash_attn_func(q, k, v, plan)
    assert torch.equal(again, first)
    torch.testing.assert_close(again.double(), _dense_out(q, k, v, before), atol=1e-4, rtol=1e-4)
    host = plan.host_lists()
    assert [t.tolist() for t in plan.tensors("cpu")] == [host[0], host[1], host[2]]
    assert host == ([[0, 32]], [[0, 32]], [int(AttnMaskType.CAUSAL)])


def test_empty_python_lists_are_the_empty_mask():
    plan = flex_attn_plan([], [], [], seqlen_q=16, seqlen_k=16)
    assert plan.num_slices == 0 and plan.host_lists() == ([], [], [])
    q, k, v = random_qkv(16, 16, 2, 1, 8)
    out, meta = flex_flash_attn_func(q, k, v, plan)
    assert not out.any() and torch.isinf(meta.lse).all() and (meta.lse < 0).all()
    grads = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert not any(g.any() for g in grads)
    assert flex_attn_plan([], [], seqlen_q=4).num_slices == 0  # attn_type_map left out
