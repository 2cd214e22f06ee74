"""The fused backward's two reduces agree bit for bit in bf16 (2 gloo processes, reference
kernel): adding the returned partial dK/dV straight into the kernel's own-part dk, dv (one
partial a row, summed in fp32 and rounded once) against the fp32 accumulator it replaces at
cp 2, on the document masks of the CP benchmark and causal."""
from ._cp2_gloo import bitwise_diffs, grads, inputs, key_for, run_on_two_ranks

MASKS = ("causal", "full_document", "causal_document")


def _check(rank):
    from magi_attention.api import dispatch
    from magi_attention.functional._dist_runtime import DistAttnRuntime
    from magi_attention.meta import OverlapConfig

    errors = []
    q, k, v, dout = inputs()
    for name in MASKS:
        key = key_for(name, OverlapConfig(fused=True))
        runtime = key.runtime
        if runtime.meta.fused is None or not runtime.reduces_in_place:
            errors.append(f"{name}: the in-place reduce did not run")
            continue
        local = [dispatch(t, key) for t in (q, k, v)]
        dout_local = dispatch(dout, key)
        in_place = grads(key, local, dout_local)
        original = DistAttnRuntime.reduces_in_place
        DistAttnRuntime.reduces_in_place = property(lambda self: False)  # the fp32 path
        try:
            accumulated = grads(key, local, dout_local)
        finally:
            DistAttnRuntime.reduces_in_place = original
        errors += bitwise_diffs(f"{name}: in-place != fp32 accumulator", in_place, accumulated)
    return errors


def test_in_place_reduce_equals_fp32_accumulator_bitwise_in_bf16():
    errors = run_on_two_ranks(_check)
    assert not errors, errors


def _check_early_reduce(rank):
    """The reduce started before dq is rounded (``early_reduce``) changes no gradient's bit."""
    from magi_attention.api import dispatch
    from magi_attention.meta import OverlapConfig

    errors = []
    q, k, v, dout = inputs()
    for name in MASKS:
        key = key_for(name, OverlapConfig(fused=True))
        local = [dispatch(t, key) for t in (q, k, v)]
        dout_local = dispatch(dout, key)
        runtime = key.runtime
        if runtime.meta.fused is None:
            errors.append(f"{name}: the fused backward did not run")
            continue
        runtime.early_reduce = False
        late = grads(key, local, dout_local)
        runtime.early_reduce = True
        early = grads(key, local, dout_local)
        errors += bitwise_diffs(f"{name}: early reduce != late", early, late)
    return errors


def test_early_reduce_changes_no_gradient_bit():
    errors = run_on_two_ranks(_check_early_reduce)
    assert not errors, errors
