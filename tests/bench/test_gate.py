"""bench.gate against an independent dense fp64 computation: the sampled-row reference (forced on
at small S) gives exactly the out and dq of the sampled rows and the dk, dv of every key for a
dout restricted to those rows; compare() passes right gradients and catches wrong ones."""
import pytest
import torch

from bench.gate import (GRAD_TOL_FACTOR, KEY_BLOCK, REL_TOL, Reference, compare, gate_rows,
                        reference, restrict_dout)
from bench.masks import build_mask, convert
from bench.problem import Shapes, make_inputs
from magi_attention.testing import dense_attention

SHAPES = Shapes(batch=2, seqlen=192, num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")
DOC_LENS = [80, 40, 72]
MASKS = {
    "causal_document": {},
    "sliding_window_causal": {"window": 20},
    "share_question": {},
    "block_sparse_per_head": {"block_q": 32, "block_k": 32, "sparsity": 0.5, "num_heads_kv": 2},
}


def _mask(label):
    name = "block_sparse" if label == "block_sparse_per_head" else label
    return build_mask(name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASKS[label])


def _dense(mask, inputs):
    """out, dq, dk, dv [batch, S, heads, D] in fp64, for the whole sequence and inputs.dout."""
    dense = convert.to_dense(mask)
    outs = []
    for b in range(SHAPES.batch):
        q, k, v = (t[b].double().requires_grad_() for t in (inputs.q, inputs.k, inputs.v))
        out, _ = dense_attention(q, k, v, dense)
        grads = torch.autograd.grad(out, (q, k, v), inputs.dout[b].double())
        outs.append((out.detach(), *grads))
    return [torch.stack(t) for t in zip(*outs)]


def _sampled(label, seed=0):
    mask = _mask(label)
    inputs = make_inputs(SHAPES, "cpu", seed=3)
    rows = gate_rows(SHAPES.seqlen, rows=32, full_max_seqlen=0, seed=seed)
    restrict_dout(inputs, rows)
    return mask, inputs, rows, reference(mask, SHAPES, inputs, rows)


def test_gate_rows_sample_blocks_above_the_threshold_only():
    assert torch.equal(gate_rows(100, rows=32, full_max_seqlen=100, seed=0), torch.arange(100))
    rows = gate_rows(1000, rows=32, full_max_seqlen=999, seed=7)
    assert len(rows) == 32 and len(set(rows.tolist())) == 32 and int(rows[-1]) == 999
    assert torch.equal(rows, rows.sort().values)
    with pytest.raises(ValueError, match="rows must be >= 1"):
        gate_rows(100, rows=0, full_max_seqlen=0, seed=0)


@pytest.mark.parametrize("label", MASKS)
def test_sampled_reference_equals_dense_on_rows_and_every_key(label):
    mask, inputs, rows, ref = _sampled(label)
    out, dq, dk, dv = _dense(mask, inputs)
    off = torch.ones(SHAPES.seqlen, dtype=torch.bool)
    off[rows] = False
    assert (inputs.dout[:, off] == 0).all() and (inputs.dout[:, rows] != 0).any()
    assert (dq[:, off] == 0).all()  # the premise: no dout, no dq
    assert dk.abs().sum() > 0
    for got, want in ((ref.out, out[:, rows]), (ref.dq, dq[:, rows]), (ref.dk, dk), (ref.dv, dv)):
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    result = compare(ref, out, (dq, dk, dv), SHAPES.dtype)
    assert not result.failed and result.status("bwd") == "ok", result.errors
    assert "grads rel_err" in result.message("bwd") and "(32 rows)" in result.message("bwd")


def _wrong(tensor, start=0, stop=None):
    t = tensor.clone()
    t[:, start:stop] *= 1.5
    return t


@pytest.mark.parametrize("which", ["dq", "dk", "dv", "dq_off_rows", "dk_one_key_block", "nan"])
def test_wrong_gradients_fail_the_backward_only(which):
    mask, inputs, rows, ref = _sampled("causal_document")
    out, dq, dk, dv = _dense(mask, inputs)
    if which == "dq":
        dq = _wrong(dq)
    elif which == "dk":
        dk = _wrong(dk)
    elif which == "dv":
        dv = _wrong(dv)
    elif which == "dq_off_rows":  # a kernel that ignores the zero dout rows
        dq = dq.clone()
        dq[:, 0] += dq.abs().max()
    elif which == "dk_one_key_block":
        # the key block with the most gradient (a sampled block or the whole tensor catch it)
        hot = int(ref.dk.abs().sum(dim=(0, 2, 3)).argmax()) // KEY_BLOCK * KEY_BLOCK
        dk = _wrong(dk, hot, hot + KEY_BLOCK)
    else:
        dv = dv.clone()
        dv[0, 5, 0, 0] = float("nan")
    result = compare(ref, out, (dq, dk, dv), SHAPES.dtype)
    name = "dv" if which == "nan" else which[:2]
    assert result.failed == (name,), result.errors
    assert result.status("fwd") == "ok" and result.status("bwd") == "wrong"
    assert result.message("bwd").startswith(f"gate: {name} rel_err")
    assert result.tolerances[name] == REL_TOL["float32"] * GRAD_TOL_FACTOR


def test_wrong_output_condemns_both_directions():
    mask, inputs, rows, ref = _sampled("causal_document")
    out, dq, dk, dv = _dense(_mask("sliding_window_causal"), inputs)  # another mask's output
    result = compare(ref, out, None, SHAPES.dtype)
    assert result.status("fwd") == result.status("bwd") == "wrong"
    assert "gate: out rel_err" in result.message("fwd")


def test_backward_is_never_ok_without_gradients():
    mask, inputs, rows, ref = _sampled("causal_document")
    out, *_ = _dense(mask, inputs)
    result = compare(ref, out, None, SHAPES.dtype)
    assert result.status("fwd") == "ok" and not result.grads_checked
    assert result.status("bwd") == "wrong"
    assert result.message("bwd") == "gate: gradients not checked"


def test_compare_refuses_bad_input():
    mask, inputs, rows, ref = _sampled("causal_document")
    out, dq, dk, dv = _dense(mask, inputs)
    with pytest.raises(ValueError, match="dtype must be one of"):
        compare(ref, out, None, "int8")
    no_grads = Reference(rows=ref.rows, out=ref.out, dq=None, dk=None, dv=None)
    with pytest.raises(ValueError, match="grads=False"):
        compare(no_grads, out, (dq, dk, dv), SHAPES.dtype)


def test_norm_in_row_chunks_equals_the_whole_norm(monkeypatch):
    import bench.gate as gate
    x = torch.randn(2, 50, 3, 4)
    monkeypatch.setattr(gate, "NORM_CHUNK_ROWS", 7)
    assert gate._norm(x) == pytest.approx(float(x.double().norm()), rel=1e-6)
    assert gate._norm(x[:, :0]) == 0.0
