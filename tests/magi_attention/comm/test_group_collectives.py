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

from magi_attention.testing.processes import spawn
from magi_attention.comm import (GroupCollectiveArgs, range_add_, range_copy_stacked_,
                                  range_gather, range_gather_stacked, range_scatter_add_,
                                  ranges_to_index)

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
    # the (k, v) forms: cast gathered from two tensors side by side, reduce into both
    k, v = _local(rank)[:, :1], _local(rank)[:, 1:] * -1
    got = group_cast((k, v), args).wait()
    expect_kv = torch.cat([torch.cat([_local(src)[a:b, :1], -_local(src)[a:b, 1:]], dim=1)
                           for src in range(WORLD) for a, b in plan[src][rank]]
                          or [torch.zeros(0, 2)])
    if not torch.equal(got, expect_kv):
        errors.append(f"rank {rank}: group_cast((k, v)) got {got.tolist()}")
    partial = torch.arange(args.recv_seqlen * 2, dtype=torch.float32).reshape(-1, 2)
    dense = torch.zeros(SEQLEN, 2)
    group_reduce(partial, dense, args).wait()
    # every rank takes part in the second reduce (ranks differ in which form they may use)
    dk, dv = torch.zeros(SEQLEN, 1), torch.zeros(SEQLEN, 1)
    again = torch.zeros(SEQLEN, 2)
    group_reduce(partial, (dk, dv) if args.sends_each_token_once else again, args).wait()
    if args.sends_each_token_once and not torch.equal(torch.cat([dk, dv], dim=1), dense):
        errors.append(f"rank {rank}: group_reduce into (dk, dv) != into one accumulator")
    if not args.sends_each_token_once:
        try:  # refused before any collective is issued
            group_reduce(partial, (dk, dv), args)
            errors.append(f"rank {rank}: group_reduce into (dk, dv) with repeated tokens ran")
        except ValueError:
            pass
    with open(f"{out_file}.{rank}", "w") as f:
        f.write("\n".join(errors))
    dist.destroy_process_group()


def test_group_cast_and_reduce_over_gloo_match_direct_indexing():
    with tempfile.TemporaryDirectory() as d:
        spawn(_worker, args=(os.path.join(d, "store"), os.path.join(d, "out")), nprocs=WORLD)
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


def test_sends_each_token_once():
    once = GroupCollectiveArgs(np.array([[4, 6], [0, 2]]), (2, 2), (0, 0))
    twice = GroupCollectiveArgs(np.array([[0, 3], [2, 5]]), (3, 3), (0, 0))
    touching = GroupCollectiveArgs(np.array([[0, 3], [3, 5]]), (3, 2), (0, 0))
    empty = GroupCollectiveArgs(np.zeros((0, 2), dtype=np.int64), (0, 0), (0, 0))
    assert once.sends_each_token_once and touching.sends_each_token_once
    assert empty.sends_each_token_once and not twice.sends_each_token_once


def test_range_gather_stacked_and_add_torch():
    k, v = torch.randn(12, 2, 3), torch.randn(12, 1, 3)
    index = torch.tensor([5, 0, 11, 3])
    torch.testing.assert_close(range_gather_stacked((k, v), index),
                               torch.cat([k[index], v[index]], dim=1), rtol=0, atol=0)
    # distinct rows, bf16: summed in fp32 and rounded once, like an fp32 accumulator
    out = torch.randn(12, 4, dtype=torch.bfloat16)
    src = torch.randn(8, 4, dtype=torch.bfloat16)[::2]  # a strided source
    expect = out.float().index_add_(0, index, src.float()).to(torch.bfloat16)
    assert torch.equal(range_add_(out, index, src), expect)
    wide = torch.zeros(12, 2, 4)  # a column slice of a wider buffer, written in place
    range_add_(wide[:, 1], index, torch.ones(4, 4))
    assert wide[:, 1].sum().item() == 16 and wide[:, 0].abs().sum().item() == 0


def test_range_copy_stacked_writes_only_the_indexed_rows():
    k, v = torch.randn(12, 2, 3), torch.randn(12, 2, 3)
    index, out_index = torch.tensor([5, 6, 7, 0]), torch.tensor([1, 2, 3, 9])
    out = torch.full((10, 4, 3), float("nan"))
    range_copy_stacked_(out, out_index, (k, v), index)
    assert torch.equal(out[out_index], torch.cat([k[index], v[index]], dim=1))
    untouched = [r for r in range(10) if r not in out_index.tolist()]
    assert out[untouched].isnan().all()
    with pytest.raises(ValueError, match="out_index"):
        range_copy_stacked_(out, out_index[:2], (k, v), index)


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
        # into / from column slices of wider buffers (k's heads of a k|v buffer)
        wide = torch.zeros(6, 7, 5)
        rt.gather_rows(x, index, out=wide[:, 2:5])
        assert torch.equal(wide[:, 2:5], x[index]) and wide[:, :2].abs().sum() == 0
        distinct = torch.tensor([7, 8, 9, 0, 39], dtype=torch.int64)
        base = torch.randn(40, 7, 5)
        got = base.clone()
        rt.add_rows_(got[:, 1:4], distinct, wide[:5, 2:5])
        expect = base.clone()
        expect[distinct, 1:4] += x[index][:5]
        torch.testing.assert_close(got, expect)
        # k and v rows copied side by side into chosen rows of a k|v buffer (strided sources)
        kk, vv = torch.randn(40, 6, 5)[:, :3], torch.randn(40, 3, 5)
        buf = torch.full((12, 6, 5), float("nan"))
        dst = torch.tensor([11, 0, 5, 6, 1, 2], dtype=torch.int64)
        rt.copy_rows_pair_(buf, dst, kk, vv, index)
        assert torch.equal(buf[dst], torch.cat([kk[index], vv[index]], dim=1))
        assert buf[[3, 4, 7, 8, 9, 10]].isnan().all()
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]
