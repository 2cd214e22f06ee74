"""group_cast / group_reduce over gloo against direct indexing, the work-handle contract, and
the range kernels (torch; Triton in interpreter mode in a subprocess)."""
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from magi_attention.comm import GroupCollectiveArgs, range_gather, range_scatter_add_, ranges_to_index

WORLD = 3
SEQLEN = 10


def _plan(rng_seed=0):
    """Random multicast plan: who[src][dst] = list of (start, end) local ranges of src."""
    rng = np.random.default_rng(rng_seed)
    plan = [[[] for _ in range(WORLD)] for _ in range(WORLD)]
    for src in range(WORLD):
        for dst in range(WORLD):
            for _ in range(rng.integers(0, 3)):
                a, b = sorted(rng.integers(0, SEQLEN + 1, size=2).tolist())
                plan[src][dst].append((a, b))
    return plan


def _args(plan, rank):
    send = [r for dst in range(WORLD) for r in plan[rank][dst]]
    send_sizes = tuple(sum(b - a for a, b in plan[rank][dst]) for dst in range(WORLD))
    recv_sizes = tuple(sum(b - a for a, b in plan[src][rank]) for src in range(WORLD))
    return GroupCollectiveArgs(np.array(send, dtype=np.int64).reshape(-1, 2), send_sizes, recv_sizes)


def _local(rank):
    return torch.arange(SEQLEN * 2, dtype=torch.float32).reshape(SEQLEN, 2) + 100 * rank


def _worker(rank, init_file, out_file):
    from magi_attention.comm import group_cast, group_reduce
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    plan = _plan()
    args = _args(plan, rank)
    handle = group_cast(_local(rank), args)
    got = handle.wait()
    expect = torch.cat([_local(src)[a:b] for src in range(WORLD) for a, b in plan[src][rank]]
                       or [torch.zeros(0, 2)])
    errors = []
    if not torch.equal(got, expect):
        errors.append(f"rank {rank}: group_cast got {got.tolist()} expected {expect.tolist()}")
    try:
        handle.wait()
        errors.append("second wait() did not raise")
    except RuntimeError:
        pass
    # group_reduce of ones: each local row gains the number of times it was sent out
    out = torch.zeros(SEQLEN, 2)
    group_reduce(torch.ones(args.recv_seqlen, 2), out, args).wait()
    count = torch.zeros(SEQLEN)
    for dst in range(WORLD):
        for a, b in plan[rank][dst]:
            count[a:b] += 1
    if not torch.equal(out, count[:, None].expand(-1, 2)):
        errors.append(f"rank {rank}: group_reduce got {out[:, 0].tolist()} expected {count.tolist()}")
    with open(f"{out_file}.{rank}", "w") as f:
        f.write("\n".join(errors))
    dist.destroy_process_group()


def test_group_cast_and_reduce_over_gloo_match_direct_indexing():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_worker, args=(os.path.join(d, "store"), os.path.join(d, "out")), nprocs=WORLD)
        errors = [open(os.path.join(d, f"out.{r}")).read() for r in range(WORLD)]
    assert not any(errors), "\n".join(errors)


def test_args_reject_inconsistent_sizes():
    with pytest.raises(ValueError, match="send_split_sizes"):
        GroupCollectiveArgs(np.array([[0, 4]]), (1, 2), (0, 0))


def test_range_ops_torch():
    x = torch.randn(12, 3)
    index = torch.from_numpy(ranges_to_index(np.array([[2, 5], [0, 1], [2, 4]])))
    assert index.tolist() == [2, 3, 4, 0, 2, 3]
    torch.testing.assert_close(range_gather(x, index), x[[2, 3, 4, 0, 2, 3]])
    out = torch.zeros(12, 3)
    range_scatter_add_(out, index, torch.ones(6, 3))
    assert out[:, 0].tolist() == [1, 0, 2, 2, 1, 0, 0, 0, 0, 0, 0, 0]


def test_range_ops_triton_interpreter_equal_torch():
    pytest.importorskip("triton", reason="triton is not installed (torch CPU wheels lack it)")
    code = textwrap.dedent("""
        import torch
        from magi_attention.comm import _range_triton as rt
        x = torch.randn(40, 3, 5)
        index = torch.tensor([7, 8, 9, 0, 7, 39], dtype=torch.int64)
        assert torch.equal(rt.gather_rows(x, index), x[index])
        out = torch.zeros(40, 3, 5)
        src = torch.randn(6, 3, 5)
        rt.scatter_add_rows_(out, index, src)
        torch.testing.assert_close(out, torch.zeros(40, 3, 5).index_add_(0, index, src))
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]
