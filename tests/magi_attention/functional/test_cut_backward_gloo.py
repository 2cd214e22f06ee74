"""The backward cut by keys sends the received keys' dK/dV to their owners before the own keys'
kernel runs, so the reduce travels while that kernel computes (2 gloo processes, reference
kernel, cp 2): the call order, and gradients bit for bit equal to the same cut run with every
collective waited for at once (overlap off: the reduce after the own keys' kernel)."""
from ._cp2_gloo import bitwise_diffs, grads, inputs, key_for, run_on_two_ranks

MASKS = ("causal", "causal_document")


def _recording(runtime, calls):
    """Wrap the runtime's backward kernel calls and reduce starts to append to ``calls``."""
    bwd, reduce = runtime._bwd, runtime._reduce

    def recorded_bwd(dout, q, k, v, out, lse, attn, backend):
        calls.append("own keys' kernel" if attn is runtime.meta.host else "received keys' kernel")
        return bwd(dout, q, k, v, out, lse, attn, backend)

    def recorded_reduce(partial, out, stage):
        calls.append("reduce started")
        return reduce(partial, out, stage)

    runtime._bwd, runtime._reduce = recorded_bwd, recorded_reduce


def _check(rank):
    from magi_attention.api import dispatch
    from magi_attention.meta import OverlapConfig

    errors = []
    q, k, v, dout = inputs()
    for name in MASKS:
        key = key_for(name, OverlapConfig(fused=True, cut="bwd"))
        runtime = key.runtime
        if runtime.cut != frozenset({"bwd"}):
            errors.append(f"{name}: the backward is not cut ({sorted(runtime.cut)})")
            continue
        local = [dispatch(t, key) for t in (q, k, v)]
        dout_local = dispatch(dout, key)
        # waited first: an overlapped cut step followed by a waited one crashed a gloo rank
        # (SIGBUS) about once in ten runs, with either order of the cut (left open)
        runtime.overlap = False
        waited = grads(key, local, dout_local)
        runtime.overlap = True
        calls = []
        _recording(runtime, calls)
        overlapped = grads(key, local, dout_local)
        want = ["received keys' kernel", "reduce started", "own keys' kernel"]
        got = [c for c in calls if c in want]
        if runtime.meta.stages[0].window is None:
            want = want[1:]  # no row reads a received key: nothing to compute first
        if got != want:
            errors.append(f"{name} rank {rank}: calls {got}, want {want}")
        errors += bitwise_diffs(f"{name}: overlapped != waited", overlapped, waited)
    return errors


def test_cut_backward_sends_the_received_keys_grads_before_the_own_keys_kernel():
    errors = run_on_two_ranks(_check)
    assert not errors, errors
