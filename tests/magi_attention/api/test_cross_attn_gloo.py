"""Cross-attention keys over gloo (CPU processes, the reference kernel in fp32) at 2 and 4 ranks
and on a 2 x 2 mesh: q over a sequence of total_seqlen_q tokens, k and v over one of
total_seqlen_k, for full, causal (bottom-right), paired documents (the varlen shortcut) and
random slices, on each overlap path. out, lse, dq, dk and dv after undispatch equal dense
attention in float64 from the masks' plain definitions; dispatch / undispatch round-trip both
sides; the overlap-off run equals the overlapped one bit for bit."""
import functools

import pytest
import torch

from magi_attention.testing.gloo import run_on_ranks

from ._cross_attn_cases import (ATOL, CASES, MODES, build_key, dense_mask, global_step, inputs,
                                max_errors, step)

def _round_trip_errors(key, name: str) -> list[str]:
    from magi_attention.api import dispatch, undispatch
    errors = []
    for side, seqlen in (("q", key.total_seqlen_q), ("kv", key.total_seqlen_k)):
        x = torch.arange(seqlen * 3, dtype=torch.float32).reshape(seqlen, 3)
        local = dispatch(x, key, side=side)
        shard = key.shard_seqlen_q if side == "q" else key.shard_seqlen_kv
        if local.shape[0] != shard or shard * key.cp_size != seqlen:
            errors.append(f"FAIL {name} side={side}: shard {local.shape[0]} of {seqlen}")
        if not torch.equal(undispatch(local, key, side=side), x):
            errors.append(f"FAIL {name} side={side}: undispatch(dispatch(x)) != x")
    return errors


def check_against_dense(rank: int, hierarchical: bool = False) -> list[str]:
    """Every case and mode on this rank: 'FAIL ...' lines, and one 'ran ...' line a key naming
    the path it took."""
    from magi_attention.testing import dense_attention
    cp = None
    if hierarchical:
        from torch.distributed.device_mesh import init_device_mesh
        cp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("inter", "intra"))
    lines = []
    for name, (seqlen_q, seqlen_k, mask) in CASES.items():
        q, k, v, dout = inputs(name)
        ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
        ref_out, ref_lse = dense_attention(*ref_in, dense_mask(seqlen_q, seqlen_k, mask))
        want = [ref_out, ref_lse, *torch.autograd.grad(ref_out, ref_in, dout.double())]
        for mode in MODES:
            key = build_key(name, mode, cp)
            case = f"{name}/{mode}"
            got = global_step(key, q, k, v, dout)
            errs = max_errors(got, want)
            if not all(e < ATOL for e in errs.values()):
                lines.append(f"FAIL {case} rank {rank}: {errs}")
            if key.meta.table.total_tokens():  # alike on every rank: the collectives match
                key.runtime.overlap = False  # every collective waited at once: same result
                serial = step(key, q, k, v, dout)
                key.runtime.overlap = True
                if not all(torch.equal(a, b) for a, b in zip(serial, step(key, q, k, v, dout))):
                    lines.append(f"FAIL {case} rank {rank}: overlap off differs")
            if mode == "auto":
                lines += _round_trip_errors(key, case)
            meta = key.runtime.meta
            lines.append(f"ran {case} rank={rank} stages={meta.num_stages} "
                         f"fused={meta.fused is not None} split={meta.fused_split is not None} "
                         f"cut={','.join(sorted(key.runtime.cut)) or '-'} "
                         f"hier={key.groups.hierarchical}")
    return lines


@pytest.mark.parametrize("world_size,hierarchical", [(2, False), (4, False), (4, True)],
                         ids=["cp2", "cp4", "mesh2x2"])
def test_cross_attention_equals_dense_attention(world_size, hierarchical):
    lines = run_on_ranks(functools.partial(check_against_dense, hierarchical=hierarchical),
                         world_size).splitlines()
    failures = [line for line in lines if not line.startswith("ran ")]
    assert not failures, "\n".join(failures)
    ran = [line for line in lines if line.startswith("ran ")]
    assert len(ran) == world_size * len(CASES) * len(MODES)
    # each mode ran its path somewhere (else a fallback would pass unseen)
    assert any("/staged2 " in line and "stages=2" in line for line in ran)
    assert any("/fused_split " in line and "split=True" in line for line in ran)
    assert any("/cut_both " in line and "cut=bwd,fwd" in line for line in ran)
    assert all(("hier=True" in line) == hierarchical for line in ran)
