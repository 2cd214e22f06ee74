import pytest

from bench.config import GateConfig, HardwareConfig, KernelBenchConfig, KernelChoice, MaskChoice

TINY_HARDWARE = HardwareConfig(name="cpu", device="cpu", seqlens=(128,), batch=1, num_heads_q=2,
                               num_heads_kv=1, head_dim=16, dtype="float32", kernels=("naive",),
                               warmup=0, repeat=1)


@pytest.fixture
def tiny_config(tmp_path):
    """A CPU sweep config writing under tmp_path; tests replace() what they need."""
    def make(kernels=("naive",), masks=("causal",), seqlens=(128,), **kw):
        return KernelBenchConfig(
            hardware=TINY_HARDWARE,
            kernels=tuple(k if isinstance(k, KernelChoice) else KernelChoice(k, k) for k in kernels),
            masks=tuple(MaskChoice(m, m) for m in masks), seqlens=tuple(seqlens),
            gate=GateConfig(full_max_seqlen=128, rows=32),
            out_file=tmp_path / "results" / "kernels" / "test.csv", **kw)
    return make

