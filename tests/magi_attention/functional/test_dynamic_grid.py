"""OverlapConfig.dynamic_grid (on by default): the runtime asks the Triton backend for the Gluon
forward's dynamic grid on exactly the forwards that run while a collective is in flight (the cut
forward's own keys, the staged forward's host stage and every stage but the last), and nowhere
else."""
import torch

from ._cp2_gloo import inputs, key_for, run_on_two_ranks


def _runtime():
    from magi_attention.functional._dist_runtime import DistAttnRuntime
    from magi_attention.meta import AttnShape, OverlapConfig, solve_magi_meta
    from magi_attention.testing.masks import causal
    meta = solve_magi_meta(causal(256), 256, 2, 32, 0, AttnShape(4, 2, 16), "min_heap",
                           OverlapConfig(fused=True))
    return DistAttnRuntime(meta.runtime)


class _Recorder:
    """A backend module whose fwd records its keyword arguments."""

    def __init__(self):
        self.calls = []

    def fwd(self, q, k, v, plan, scale, softcap, max_logits, **kwargs):
        self.calls.append(kwargs)
        return torch.zeros_like(q), torch.zeros(q.shape[:2]), None


def test_only_triton_forwards_beside_comm_ask_for_the_dynamic_grid(monkeypatch):
    from magi_attention.functional import _dist_runtime
    runtime = _runtime()
    recorder = _Recorder()
    monkeypatch.setattr(_dist_runtime, "load_backend", lambda name: recorder)
    q = torch.randn(8, 4, 16)
    k = v = torch.randn(8, 2, 16)
    asked = {}
    for dynamic in (False, True):
        for overlap in (False, True):
            for backend in ("triton", "fa4", "reference"):
                for beside in (False, True):
                    runtime.dynamic_grid, runtime.overlap = dynamic, overlap
                    recorder.calls.clear()
                    runtime._fwd(q, k, v, runtime.meta.host, backend, beside_comm=beside)
                    asked[dynamic, overlap, backend, beside] = recorder.calls[0]
    want = {"dynamic": True}
    assert asked.pop((True, True, "triton", True)) == want
    assert all(kwargs == {} for kwargs in asked.values()), asked


def _check_beside_comm(rank):
    """Per path, the beside_comm flag of each forward kernel of one step."""
    from magi_attention.api import calc_attn, dispatch
    from magi_attention.meta import OverlapConfig

    errors = []
    q, k, v, _ = inputs()
    # dynamic_grid is OverlapConfig's default; the static arm must reach the runtime as off
    paths = {"fused whole": (OverlapConfig(fused=True), [False]),
             "cut forward": (OverlapConfig(fused=True, cut="fwd"), [True, False]),
             "three stages": (OverlapConfig(fused=False, num_stages=3),
                              [True, True, True, False]),
             "static": (OverlapConfig(fused=True, cut="fwd", dynamic_grid=False), [True, False])}
    for label, (overlap, want) in paths.items():
        key = key_for("causal", overlap)
        runtime = key.runtime
        if runtime.dynamic_grid != overlap.dynamic_grid or runtime.dynamic_grid != (
                label != "static"):
            errors.append(f"{label}: the key set dynamic_grid={runtime.dynamic_grid}")
        if label == "three stages" and len(runtime.meta.stages) != 3:
            errors.append(f"{label}: {len(runtime.meta.stages)} stages")
            continue
        flags = []
        original = runtime._fwd

        def recording(*args, beside_comm=False, **kwargs):
            flags.append(beside_comm)
            return original(*args, beside_comm=beside_comm, **kwargs)
        runtime._fwd = recording
        local = [dispatch(t, key) for t in (q, k, v)]
        with torch.no_grad():
            calc_attn(*local, key)
        if flags != want:
            errors.append(f"{label}: beside_comm per forward kernel {flags}, want {want}")
    return errors


def test_forwards_beside_a_collective_are_the_ones_marked():
    errors = run_on_two_ranks(_check_beside_comm)
    assert not errors, errors
