"""The FA4 backend's native calls on CPU: the native-group path (one native call per block of
rows, dK/dV of shared keys added) and the single dense / varlen form. FA4's interface is
replaced by a stand-in that computes FA4's native semantics (``native_dense``: varlen entries,
bottom-right windows) with dense torch attention, so what is
checked is the glue (row/key slicing, in-place out and dQ, the lse concatenation, the dK/dV
sums) against the reference backend on the whole mask. The real kernels: test_fa4.py (GPU)."""
import math

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice
from magi_attention.kernels import fa4, reference
from magi_attention.kernels.fa4._native import NativeForm, native_dense
from magi_attention.kernels.plan import FlexAttnPlan
from magi_attention.testing import dense_attention

TOL = dict(atol=1e-5, rtol=1e-5)  # the reference backend accumulates in fp32


def _form(kw, seqlen_q, seqlen_k):
    cq, ck = kw.get("cu_seqlens_q"), kw.get("cu_seqlens_k")
    form = NativeForm(None if cq is None else tuple(cq.tolist()),
                      None if ck is None else tuple(ck.tolist()),
                      kw.get("window_size_left"), kw.get("window_size_right"))
    return torch.from_numpy(native_dense(form, seqlen_q, seqlen_k))


class FakeInterface:
    """FA4's ``_flash_attn_fwd`` / ``_flash_attn_bwd`` on the native path, in fp64 torch."""

    calls = 0

    @staticmethod
    def _unbatch(t):
        return (t[0], True) if t.dim() == 4 else (t, False)

    def _flash_attn_fwd(self, q, k, v, softmax_scale, softcap, return_lse, out=None, **kw):
        FakeInterface.calls += 1
        out = torch.empty_like(q) if out is None else out
        (q, batched), (k, _), (v, _) = self._unbatch(q), self._unbatch(k), self._unbatch(v)
        o, lse = dense_attention(q, k, v, _form(kw, q.shape[0], k.shape[0]), softmax_scale, softcap)
        (out[0] if batched else out).copy_(o)
        lse = lse.transpose(0, 1).float().contiguous()  # FA4: [(1,) Hq, Sq]
        return out, (lse[None] if batched else lse) if return_lse else None

    def _flash_attn_bwd(self, q, k, v, out, dout, lse, softmax_scale, softcap, deterministic,
                        dq=None, **kw):
        dq = torch.empty_like(q) if dq is None else dq
        (q, batched), (k, _), (v, _) = self._unbatch(q), self._unbatch(k), self._unbatch(v)
        dout, _ = self._unbatch(dout)
        qc, kc, vc = (t.double().requires_grad_() for t in (q, k, v))
        o, _ = dense_attention(qc, kc, vc, _form(kw, q.shape[0], k.shape[0]), softmax_scale, softcap)
        gq, gk, gv = torch.autograd.grad(o, (qc, kc, vc), dout.double())
        (dq[0] if batched else dq).copy_(gq)
        wrap = (lambda t: t[None]) if batched else (lambda t: t)  # noqa: E731
        return wrap(gq.to(q.dtype)), wrap(gk.to(k.dtype)), wrap(gv.to(v.dtype))


@pytest.fixture
def fake_fa4(monkeypatch):
    monkeypatch.setattr(fa4, "_fa4", lambda: (FakeInterface(), None, None))
    FakeInterface.calls = 0


def _two_runs(n, a):  # a CP rank's first and last quarter of causal, keys in global order
    return [AttnSlice.make(0, a, 0, a, AttnMaskType.CAUSAL),
            AttnSlice.make(a, 2 * a, 0, n, AttnMaskType.CAUSAL)], 2 * a, n


def _four_blocks():  # full; causal on shared keys; causal; full (no two share a window: 4 calls)
    slices = [AttnSlice.make(0, 20, 10, 50),
              AttnSlice.make(20, 45, 0, 60, AttnMaskType.CAUSAL),
              AttnSlice.make(45, 60, 5, 25, AttnMaskType.CAUSAL),
              AttnSlice.make(60, 70, 25, 40)]
    return slices, 70, 60


def _one_causal():  # one native form, FA4's dense kernel
    return [AttnSlice.make(0, 40, 0, 60, AttnMaskType.CAUSAL)], 40, 60


def _documents():  # one native form, FA4's varlen kernel
    return [AttnSlice.make(0, 30, 0, 30, AttnMaskType.CAUSAL),
            AttnSlice.make(30, 70, 30, 70, AttnMaskType.CAUSAL)], 70, 70


CASES = {"two-runs": (_two_runs(96, 24), 2), "four": (_four_blocks(), 4),
         "dense": (_one_causal(), 1), "varlen": (_documents(), 1)}


@pytest.mark.parametrize("case,calls", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("return_lse", [True, False])
def test_native_calls_match_the_reference(fake_fa4, case, calls, return_lse):
    """Groups (one call each) and single native forms (dense and varlen) alike."""
    slices, seqlen_q, seqlen_k = case
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    conv = fa4._conversion(plan, 16, "cpu")
    assert len(conv.groups) == calls if calls > 1 else conv.native is not None
    g = torch.Generator().manual_seed(0)
    q, dout = (torch.randn(seqlen_q, 4, 16, generator=g, dtype=torch.float64) for _ in range(2))
    k, v = (torch.randn(seqlen_k, 2, 16, generator=g, dtype=torch.float64) for _ in range(2))
    scale = 16 ** -0.5
    out, lse, _ = fa4.fwd(q, k, v, plan, scale, return_lse=return_lse)
    assert FakeInterface.calls == calls
    ro, rl, _ = reference.fwd(q, k, v, plan, scale)
    torch.testing.assert_close(out, ro, **TOL)
    if not return_lse:
        assert lse is None
        return
    has = torch.isfinite(rl)
    torch.testing.assert_close(lse[has].double(), rl[has].double(), **TOL)
    assert (lse[~has] == -math.inf).all()
    got = fa4.bwd(dout, q, k, v, out, lse, plan, scale)
    ref = reference.bwd(dout, q, k, v, ro, rl, plan, scale)
    for name, a, b in zip(("dq", "dk", "dv"), got, ref):
        torch.testing.assert_close(a, b, msg=name, **TOL)


def test_native_false_skips_the_groups(fake_fa4):
    """``native=False`` still means the block-sparse kernels (benchmarks compare the two)."""
    slices, seqlen_q, seqlen_k = _two_runs(96, 24)
    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)
    conv = fa4._conversion(plan, 16, "cpu")
    assert fa4._uses_groups(conv, native=True) and not fa4._uses_groups(conv, native=False)
