"""kernels/triton/launch.CachedLaunch on the CPU, with a stand-in for a JIT kernel: which call
goes through Triton (binding, compile, launch) and which calls the compiled launcher directly,
and with what arguments. The GPU test (test_triton_gpu.py) checks the real launches' results."""
import pytest
import torch

pytest.importorskip("triton")

from magi_attention.kernels.triton import launch as launch_module  # noqa: E402


class FakeCompiled:
    packed_metadata = function = "handle"

    def __init__(self, log):
        self.log = log

    def run(self, g0, g1, g2, stream, function, packed, meta, enter, exit_, *values):
        self.log.append(("direct", (g0, g1, g2), stream, values))


class FakeJit:
    """A JIT kernel with parameters (x, n, BLOCK), BLOCK a constexpr passed by keyword."""
    arg_names = ["x", "n", "BLOCK"]

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("triton", grid, args, kwargs))
            return FakeCompiled(self.log)
        return launch


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(launch_module, "JITFunction", FakeJit)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch_module, "_raw_stream", lambda device: 7)
    jit = FakeJit()
    return jit, launch_module.CachedLaunch(jit)


def test_a_key_launches_through_triton_once_then_directly_with_every_parameter(fake):
    jit, launch = fake
    x = torch.zeros(8)
    launch((4, ), "k", x, 3, BLOCK=16, num_warps=4)
    launch((4, 2), "k", x, 3, BLOCK=16, num_warps=4)
    kinds = [entry[0] for entry in jit.log]
    assert kinds == ["triton", "direct"]
    _, grid, stream, values = jit.log[1]
    assert grid == (4, 2, 1) and stream == 7
    assert values[0] is x and values[1:] == (3, 16)  # the constexpr after the positionals


def test_a_new_key_constexpr_or_alignment_goes_through_triton_again(fake):
    jit, launch = fake
    x = torch.zeros(64)
    launch((1, ), "k", x, 3, BLOCK=16)
    launch((1, ), "k2", x, 3, BLOCK=16)  # another key
    launch((1, ), "k", x, 3, BLOCK=32)  # another constexpr
    launch((1, ), "k", x[1:], 3, BLOCK=16)  # a base 4 bytes off 16-byte alignment
    assert [entry[0] for entry in jit.log] == ["triton"] * 4
    launch((1, ), "k", x[4:], 3, BLOCK=16)  # aligned again: the first entry's handle
    assert jit.log[-1][0] == "direct"


def test_no_key_or_a_parameter_left_to_its_default_never_caches(fake):
    jit, launch = fake
    x = torch.zeros(8)
    for _ in range(2):
        launch((1, ), None, x, 3, BLOCK=16)  # off the GPU: no key
        launch((1, ), "k", x, 3)  # BLOCK left to a default: the tail is unknown
    assert [entry[0] for entry in jit.log] == ["triton"] * 4
