"""The fused backward's two reduces agree bit for bit in bf16 (2 gloo processes, reference
kernel): adding the returned partial dK/dV straight into the kernel's own-part dk, dv (one
partial a row, summed in fp32 and rounded once) against the fp32 accumulator it replaces at
cp 2, on the document masks of the CP benchmark and causal."""
import torch

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


SWITCHES = ("early_start",)


def _check_runtime_switches(rank):
    """Each of the runtime's switches (the Gluon forward started before the cast lands, which
    off CUDA says why it does not apply) changes no bit of the output or of a gradient."""
    from magi_attention.api import calc_attn, dispatch
    from magi_attention.meta import OverlapConfig

    errors = []
    q, k, v, dout = inputs()
    for name in MASKS:
        key = key_for(name, OverlapConfig(fused=True))
        runtime = key.runtime
        if runtime.meta.fused is None:
            errors.append(f"{name}: the fused stage did not run")
            continue
        local = [dispatch(t, key) for t in (q, k, v)]
        dout_local = dispatch(dout, key)

        def step():
            with torch.no_grad():
                out = calc_attn(*local, key)[0]
            return out, grads(key, local, dout_local)

        for switch in SWITCHES:
            setattr(runtime, switch, False)
        out, want = step()
        for switch in SWITCHES:
            setattr(runtime, switch, True)
            got_out, got = step()
            if switch == "early_start":
                reason = runtime.early_start_reason(local[0], local[1])
                if reason is None:
                    errors.append(f"{name}: early_start on gloo: {reason}")
            setattr(runtime, switch, False)
            if not torch.equal(got_out, out):
                errors.append(f"{name}: {switch} changed the output")
            errors += bitwise_diffs(f"{name}: {switch}", got, want)
    return errors


def test_runtime_switches_change_no_bit():
    errors = run_on_two_ranks(_check_runtime_switches)
    assert not errors, errors
