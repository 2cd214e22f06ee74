"""scripts/dev/fwd_fa4_probe.py on the CPU: its --check (the Gluon kernel's results against the
torch reference) passes an exact stand-in and stops a wrong one, in both directions, and the
probe's masks are the bench's. The kernels themselves run on the device machine."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

S = 256


@pytest.fixture
def probe(load_script, monkeypatch):
    """The script with CPU inputs and plans, and the reference standing in for both Gluon
    kernels (``state["wrong"]`` perturbs what the stand-ins return)."""
    from magi_attention.kernels import reference
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.plan import FlexAttnPlan
    module = load_script("scripts/dev/fwd_fa4_probe.py")
    state = {"wrong": 0.0}

    def inputs(seqlen):
        g = torch.Generator().manual_seed(0)
        return tuple(torch.randn(seqlen, h, 128, generator=g).to(torch.bfloat16)
                     for h in (8, 2, 2, 8))

    def mask_plan():
        return FlexAttnPlan.from_slices(list(state["mask"].slices), S, S)

    def fwd(q, k, v, plan, scale):
        out, lse, mx = reference.fwd(q, k, v, mask_plan(), scale)
        return out + state["wrong"], lse, mx

    def bwd(dout, q, k, v, out, lse, plan, scale):
        dq, dk, dv = reference.bwd(dout, q, k, v, out, lse, mask_plan(), scale)
        return dq, dk + state["wrong"], dv

    monkeypatch.setattr(module, "inputs", inputs)
    monkeypatch.setattr(module, "probe_plan", lambda mask, seqlen, m, plan="pick":
                        plan_block_sparse(list(mask.slices), seqlen, seqlen, m.BLOCK_M, m.BLOCK_N))
    monkeypatch.setattr(module.gf, "launch_fwd", fwd)
    monkeypatch.setattr(module.gb, "launch_bwd", bwd)
    return module, state


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_the_probe_check_passes_the_reference_and_stops_a_wrong_kernel(probe, direction, capsys):
    module, state = probe
    state["mask"] = mask = module.probe_mask("causal_document", S)
    assert mask.name == "causal_document" and mask.doc_lens is not None
    module.check(mask, S, direction)
    assert f"check {direction} causal_document {S}" in capsys.readouterr().out
    state["wrong"] = 1.0
    with pytest.raises(SystemExit, match="check failed"):
        module.check(mask, S, direction)


@pytest.mark.parametrize("which", ["grid", "cut", "grid_both", "pick"])
def test_the_probe_plan_builds_the_arm_it_names(load_script, monkeypatch, which):
    """--plan: the grid's plan, the one cut at the slices, the grid's with the cut one built and
    held (so that no later tensor takes its memory: only the kernel differs from the cut arm),
    or what the module's pick_plan takes (the backward's on a 16k document mask: cut)."""
    from magi_attention.kernels import block_sparse
    module = load_script("scripts/dev/fwd_fa4_probe.py")
    real = block_sparse.plan_block_sparse
    monkeypatch.setattr(module, "plan_block_sparse",
                        lambda *a, device=None, **kw: real(*a, device="cpu", **kw))
    module._KEPT.clear()
    seqlen = 16384
    mask = module.probe_mask("causal_document", seqlen)
    plan = module.probe_plan(mask, seqlen, module.gb, which)
    assert plan.cut_at_slices == (which in ("cut", "pick"))
    assert [p.cut_at_slices for p in module._KEPT] == ([True] if which == "grid_both" else [])
