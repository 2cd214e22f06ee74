"""Backend "auto" per mask: FA4 where it runs the mask at its speed (native forms, few partial
tiles), the Triton backend where FA4 would mask most tile pairs cell by cell (block_sparse,
hash_sparse, var_block_sparse, share_question at 16k). CPU: the rule is host arithmetic on the
mask's FA4 plan; which backend can run the inputs is faked (none can on a CPU)."""
import pytest
import torch

from magi_attention.functional import _backends
from magi_attention.kernels import fa4
from magi_attention.kernels.plan import FlexAttnPlan
from magi_attention.testing.masks import MEASURED_PACKS, named_mask

SEQLEN = 16384
# (mask, FA4 keeps it): share of partial 128 x 128 pairs in brackets (kernels.fa4's table)
CASES = [("causal", True), ("causal_document", True), ("block_causal_document", True),
         ("sliding_window_causal", True), ("global_sliding_window", True),  # 10%
         ("qk_sparse", True),  # 15%
         ("share_question", False),  # 28%
         ("var_block_sparse", False), ("block_sparse", False), ("hash_sparse", False)]


def _plan(name: str) -> FlexAttnPlan:
    slices = named_mask(name, SEQLEN, doc_lens=MEASURED_PACKS[SEQLEN], seed=0)
    return FlexAttnPlan.from_slices(slices, SEQLEN, SEQLEN)


@pytest.mark.parametrize("name, keeps_fa4", CASES)
def test_fa4_mask_reason_names_masks_of_many_partial_tiles(name, keeps_fa4):
    reason = fa4.mask_reason(_plan(name), 128)
    assert (reason is None) == keeps_fa4, reason
    if reason is not None:
        assert "partial" in reason


@pytest.fixture
def triton_runs_everything(monkeypatch):
    """On a CPU no fast backend runs the inputs: pretend triton does, as on a Hopper GPU."""
    real = _backends.backend_reason
    monkeypatch.setattr(_backends, "backend_reason",
                        lambda name, *a, **kw: None if name == "triton" else real(name, *a, **kw))


@pytest.mark.parametrize("name, keeps_fa4", CASES)
def test_auto_takes_triton_for_masks_fa4_runs_slowly(triton_runs_everything, name, keeps_fa4):
    plan = _plan(name)
    q = torch.empty(4, 8, 128, dtype=torch.bfloat16)
    k = torch.empty(4, 1, 128, dtype=torch.bfloat16)
    chosen = _backends.backend_for_mask("auto", "fa4", plan, q, k, k)
    assert chosen == ("fa4" if keeps_fa4 else "triton")
    # decided once, kept in the plan: a second call is a lookup with the same answer
    assert _backends.backend_for_mask("auto", "fa4", plan, q, k, k) == chosen
    assert any(key[0] == "auto_backend" for key in plan._state if isinstance(key, tuple))


def test_explicit_backends_and_other_choices_are_never_changed(triton_runs_everything):
    plan = _plan("block_sparse")
    q = torch.empty(4, 8, 128, dtype=torch.bfloat16)
    assert _backends.backend_for_mask("fa4", "fa4", plan, q, q, q) == "fa4"
    assert _backends.backend_for_mask("auto", "triton", plan, q, q, q) == "triton"
    assert _backends.backend_for_mask("auto", "reference", plan, q, q, q) == "reference"


def test_fa4_stays_where_triton_cannot_run_the_inputs(monkeypatch):
    monkeypatch.setattr(_backends, "backend_reason", lambda name, *a, **kw: "no triton here")
    q = torch.empty(4, 8, 96, dtype=torch.bfloat16)  # head_dim 96: FA4 only
    assert _backends.backend_for_mask("auto", "fa4", _plan("block_sparse"), q, q, q) == "fa4"
