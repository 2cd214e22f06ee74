"""MagiAttention end to end over gloo (CPU processes, reference kernel): for every mask pattern
and dispatch algorithm, undispatch(calc_attn(dispatch(q, k, v))) and the undispatched dq, dk, dv
equal single-device dense attention. One process group per cp_size; masks loop inside it."""
import json
import os
import tempfile
import traceback

import pytest
import torch
import torch.distributed as dist
from magi_attention.testing.processes import spawn

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

SEQLEN = 256
DOC_LENS = [64, 32, 96, 64]
HEADS = (4, 2)
HEAD_DIM = 16
SMALL_PARAMS = {"sliding_window": {"window": 24}, "sliding_window_causal": {"window": 24},
                "global_sliding_window": {"window": 24, "num_global": 8},
                "block_causal_document": {"block_size": 16}, "hash_sparse": {"run_len": 16},
                "block_sparse": {"block": 16},
                "var_block_sparse": {"min_block": 8, "max_block": 48}}
ATOL = 2e-4


def _worker(rank, cp_size, init_file, out_dir, chunk_size, num_stages, mesh_shape=None,
            mask_names=None):
    from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch
    from magi_attention.common import slices_to_tensors, to_dense
    from magi_attention.meta import DISPATCH_ALGORITHMS, OverlapConfig
    from magi_attention.testing import dense_attention, random_qkv
    from magi_attention.testing.masks import MASK_NAMES, named_mask

    # num_stages: a count, None (the solver chooses), "fused" (one kernel over own + received
    # KV), "staged1" (one overlapped stage with a merge), "cut_<fwd|bwd|both>" (the fused
    # stage cut by keys in those directions: own keys' kernel, received keys', merged) or
    # "split_<fwd|bwd>" (cut by rows in that direction only, the other whole)
    overlap = {"fused": OverlapConfig(fused=True, split=True),
               "staged1": OverlapConfig(fused=False, num_stages=1)}.get(num_stages)
    if isinstance(num_stages, str) and num_stages.startswith("cut_"):
        overlap = OverlapConfig(fused=True, cut=num_stages[4:])
    if isinstance(num_stages, str) and num_stages.startswith("split_"):  # one direction by rows
        overlap = OverlapConfig(fused=True, split=num_stages[6:])
    stages = None if isinstance(num_stages, str) else num_stages

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=cp_size)
    cp = None
    if mesh_shape is not None:
        from torch.distributed.device_mesh import init_device_mesh
        cp = init_device_mesh("cpu", mesh_shape, mesh_dim_names=("inter", "intra"))
    results = []
    q, k, v = random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0, requires_grad=False)
    dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM, generator=torch.Generator().manual_seed(1))
    for name in mask_names or MASK_NAMES:
        mask = named_mask(name, SEQLEN, doc_lens=DOC_LENS, seed=1, **SMALL_PARAMS.get(name, {}))
        ref = [t.clone().requires_grad_() for t in (q, k, v)]
        ref_out, _ = dense_attention(*ref, to_dense(mask, SEQLEN))
        ref_grads = torch.autograd.grad(ref_out, ref, dout.double())
        for alg in DISPATCH_ALGORITHMS:
            case = f"{name}/{alg}"
            try:
                key = magi_attn_flex_key(*slices_to_tensors(mask), SEQLEN, *HEADS,
                                         HEAD_DIM, cp, chunk_size, dispatch_alg=alg,
                                         num_stages=stages, overlap=overlap,
                                         backend="reference", dtype=torch.float32)
                local = [dispatch(t, key).requires_grad_() for t in (q, k, v)]
                out_local, meta = calc_attn(*local, key)
                split = key.runtime.meta.fused_split is not None
                serial_grads = None
                if key.meta.table.total_tokens():  # on every rank alike (collectives match)
                    key.runtime.overlap = False  # every collective waited at once: same result
                    serial_in = [t.detach().clone().requires_grad_() for t in local]
                    serial, _ = calc_attn(*serial_in, key)
                    serial.backward(dispatch(dout, key))
                    serial_grads = [t.grad for t in serial_in]
                    key.runtime.overlap = True
                    assert torch.equal(serial.detach(), out_local.detach()), case
                out_local.backward(dispatch(dout, key))
                if serial_grads is not None:
                    assert all(torch.equal(a, b.grad) for a, b in zip(serial_grads, local)), case
                out = undispatch(out_local.detach(), key)
                grads = [undispatch(t.grad, key) for t in local]
                errs = {"out": (out.double() - ref_out).abs().max().item()}
                for g_name, g, r in zip(("dq", "dk", "dv"), grads, ref_grads):
                    errs[g_name] = (g.double() - r).abs().max().item()
                ok = all(e < ATOL for e in errs.values())
                layout = key.runtime.meta.fused_layout
                results.append({"case": case, "ok": ok, "errs": errs,
                                # which fused-buffer paths ran: own part one piece (its
                                # dK/dV read as a view) / received written in place
                                "in_place": None if layout is None else
                                [layout.own_at is not None, layout.recv_at is not None],
                                "num_stages": key.num_stages,
                                "fused": key.runtime.meta.fused is not None,
                                "split": split,
                                "cut": sorted(key.runtime.cut),
                                # the received keys' rows, where cut by keys: all of the
                                # shard's or part of them (their kernel and merge on those)
                                "window": _window_kind(key.runtime.meta),
                                # the fused backward's reduce: into dk, dv (one partial a row)
                                # or through an fp32 accumulator
                                "reduce_in_place": bool(key.runtime.meta.stages)
                                and key.runtime.reduces_in_place,
                                "hierarchical": key.groups.hierarchical})
            except Exception:
                results.append({"case": case, "ok": False, "error": traceback.format_exc()})
                raise
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


def _window_kind(meta) -> str | None:
    """"all" / "part": stage 0 reads received keys on every row of the shard / on some."""
    window = meta.stages[0].window if meta.stages else None
    if window is None:
        return None
    return "all" if window.covers(meta.shard_seqlen) else "part"


def run_group(cp_size, chunk_size, num_stages, mesh_shape=None, mask_names=None):
    with tempfile.TemporaryDirectory() as out_dir:
        init_file = os.path.join(out_dir, "store")
        spawn(_worker, args=(cp_size, init_file, out_dir, chunk_size, num_stages, mesh_shape,
                                mask_names),
                 nprocs=cp_size, join=True)
        return [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(cp_size)]


@pytest.mark.parametrize("cp_size,chunk_size,num_stages",
                         [(2, 32, None), (4, 16, 2), (2, 32, "fused"), (4, 16, "fused"),
                          (2, 32, "staged1"), (2, 32, "cut_fwd"), (4, 16, "cut_bwd"),
                          (2, 32, "cut_both"), (2, 32, "split_fwd")],
                         ids=["cp2-chunk32-auto_stages", "cp4-chunk16-2_stages", "cp2-fused",
                              "cp4-fused", "cp2-staged1", "cp2-cut_fwd", "cp4-cut_bwd",
                              "cp2-cut_both", "cp2-split_fwd"])
def test_magi_attn_equals_dense_attention_fwd_bwd_every_mask_and_algorithm(cp_size, chunk_size,
                                                                           num_stages):
    per_rank = run_group(cp_size, chunk_size, num_stages)
    from magi_attention.meta import DISPATCH_ALGORITHMS
    from magi_attention.testing.masks import MASK_NAMES
    assert len(per_rank[0]) == len(MASK_NAMES) * len(DISPATCH_ALGORITHMS)
    failures = [f"rank {r}: {res}" for r, results in enumerate(per_rank) for res in results
                if not res["ok"]]
    assert not failures, "\n".join(failures)
    if num_stages == "fused":  # every case with remote KV ran the fused kernel
        assert all(res["fused"] or res["num_stages"] == 0 for res in per_rank[0])
        # balanced_runs' global-order buffer ran with block copies on both sides somewhere
        runs = [res["in_place"] for results in per_rank for res in results
                if res["case"].endswith("/balanced_runs") and res["in_place"]]
        assert [False, True] in runs or [False, False] in runs
        assert [True, False] in runs or [False, False] in runs
        # the fused stage ran cut by rows (local rows first) on some cases, whole on others
        splits = {res["split"] for results in per_rank for res in results if res["fused"]}
        assert splits == {True, False}
        # the whole fused stage's backward reduced into dk, dv directly at cp 2, and through the
        # fp32 accumulator where a token went to several ranks (cp 4)
        whole = {res["reduce_in_place"] for results in per_rank for res in results
                 if res["fused"] and not res["split"]}
        assert whole == ({True} if cp_size == 2 else {True, False})
    if num_stages == "split_fwd":  # the forward cut by rows on some cases, the backward whole
        assert {res["split"] for results in per_rank for res in results if res["fused"]} == {
            True, False}
    if num_stages == "staged1":
        assert not any(res["fused"] for res in per_rank[0])
    if isinstance(num_stages, str) and num_stages.startswith("cut_"):
        # every fused case ran cut as asked (the CPU "auto" would have cut nothing)
        want = ["bwd", "fwd"] if num_stages == "cut_both" else [num_stages[4:]]
        cuts = [res["cut"] for results in per_rank for res in results if res["fused"]]
        assert cuts and all(c == want for c in cuts)
        # the received keys' kernel ran on part of the rows somewhere, on all of them elsewhere
        windows = {res["window"] for results in per_rank for res in results if res["fused"]}
        assert {"all", "part"} <= windows, windows


HIER_MASKS = ["causal", "causal_document", "sliding_window", "global_sliding_window",
              "block_sparse"]


@pytest.mark.parametrize("num_stages", [2, "fused", "cut_both"])
def test_hierarchical_2x2_mesh_equals_dense_attention(num_stages):
    per_rank = run_group(4, 16, num_stages, mesh_shape=(2, 2), mask_names=HIER_MASKS)
    from magi_attention.meta import DISPATCH_ALGORITHMS
    assert len(per_rank[0]) == len(HIER_MASKS) * len(DISPATCH_ALGORITHMS)
    assert all(res.get("hierarchical") for results in per_rank for res in results)
    failures = [f"rank {r}: {res}" for r, results in enumerate(per_rank) for res in results
                if not res["ok"]]
    assert not failures, "\n".join(failures)
