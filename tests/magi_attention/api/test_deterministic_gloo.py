"""deterministic=True keys over gloo at 2 and 4 ranks and on a 2 x 2 mesh: two runs of forward +
backward, each on a freshly built key, give out, lse, dq, dk and dv bit for bit alike, on every
overlap path, for cross- and self-attention; and the keys' group_reduce took the ordered
(source-rank order) sum wherever a token went to several ranks, which a key without it never
takes. On CPU the plain scatter-add happens to add in order too, so what makes the order
matter on CUDA (atomics) is shown in tests/magi_attention/comm/test_group_reduce_order.py."""
import functools
import importlib

import pytest
import torch

from magi_attention.testing.gloo import run_on_ranks

from ._cross_attn_cases import MODES, build_key, inputs, step

NAMES = ("full", "random_slices", "paired_docs_causal", "self_causal_docs")


def _count_ordered_sums():
    """Patch group_reduce's ordered sum to count its calls (this process only); returns the
    counter, a one-element list."""
    # the module, not the function that magi_attention.comm exports under its name
    module = importlib.import_module("magi_attention.comm.group_reduce")
    calls, ordered = [0], module.ordered_scatter_add_

    def counted(*args, **kwargs):
        calls[0] += 1
        return ordered(*args, **kwargs)
    module.ordered_scatter_add_ = counted
    return calls


def _repeats_tokens(key) -> bool:
    """Whether some stage of this rank's key sends a token to several ranks (so its reduce
    receives several partials for that row)."""
    return any(not s.cast.sends_each_token_once for s in key.runtime.meta.stages)


def check_two_runs_bitwise(rank: int, hierarchical: bool = False) -> list[str]:
    cp = None
    if hierarchical:
        from torch.distributed.device_mesh import init_device_mesh
        cp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("inter", "intra"))
    calls = _count_ordered_sums()
    lines = []
    for name in NAMES:
        q, k, v, dout = inputs(name)
        for mode in MODES:
            case = f"{name}/{mode}"
            before = calls[0]
            first = build_key(name, mode, cp, deterministic=True)
            runs = [step(first, q, k, v, dout),
                    step(build_key(name, mode, cp, deterministic=True), q, k, v, dout)]
            if not (first.deterministic and first.runtime.deterministic):
                lines.append(f"FAIL {case}: the key is not deterministic")
            for label, a, b in zip(("out", "lse", "dq", "dk", "dv"), *runs):
                if not torch.equal(a, b):
                    lines.append(f"FAIL {case} rank {rank}: {label} differs between runs")
            ordered = calls[0] > before
            # hierarchical: the relay's reduce takes several partials a row wherever two nodes'
            # ranks need one token, so it may run ordered even where the flat table repeats none
            if ordered != _repeats_tokens(first) and not (hierarchical and ordered):
                lines.append(f"FAIL {case} rank {rank}: ordered sum ran={ordered}, tokens sent "
                             f"to several ranks={_repeats_tokens(first)}")
            lines.append(f"ran {case} rank={rank} ordered={ordered}")
    plain = calls[0]
    step(build_key("full", "staged2", cp), *inputs("full"))  # deterministic=False
    if calls[0] != plain:
        lines.append(f"FAIL rank {rank}: a key without deterministic summed in order")
    return lines


@pytest.mark.parametrize("world_size,hierarchical", [(2, False), (4, False), (4, True)],
                         ids=["cp2", "cp4", "mesh2x2"])
def test_deterministic_two_runs_are_bitwise_equal(world_size, hierarchical):
    lines = run_on_ranks(functools.partial(check_two_runs_bitwise, hierarchical=hierarchical),
                         world_size).splitlines()
    failures = [line for line in lines if not line.startswith("ran ")]
    assert not failures, "\n".join(failures)
    ran = [line for line in lines if line.startswith("ran ")]
    assert len(ran) == world_size * len(NAMES) * len(MODES)
    if world_size == 4:  # the ordered sum ran (at cp 2 a token goes to one other rank at most)
        assert any("ordered=True" in line for line in ran)
