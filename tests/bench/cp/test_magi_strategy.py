"""bench.cp.magi: MagiAttention as a CP strategy, over gloo with 2 and 4 processes.

Equality with the fp64 dense oracle (out, dq, dk, dv gathered back to global order) for every
shared-mask pattern at cp 2 and a subset at cp 4, with non-default knobs; unsupported reasons;
and the bytes it reports against a count from the dense mask and its own layout.
"""
from __future__ import annotations

import functools
import tempfile
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist

from bench.cp import load_strategy
from bench.cp.magi import MagiAttention, default_chunk_size
from bench.cp.verify import Cell, Problem, check_cells
from bench.data import sample_doc_lens
from bench.masks import MASK_NAMES, build_mask
from magi_attention.testing.processes import spawn
from magi_attention.common import to_dense

from ._small_masks import SMALL_MASK_PARAMS as MASK_PARAMS

SEQLEN = 256
PROBLEM = Problem(seqlen=SEQLEN, num_heads_q=4, num_heads_kv=2, head_dim=16,
                  doc_lens=tuple(sample_doc_lens(SEQLEN, seed=8, cap_ratio=0.5)))
CP4_MASKS = ("full", "causal", "causal_document", "sliding_window_causal", "share_question")
KNOBS = {2: [{}, {"chunk_size": 16, "num_stages": 2, "dispatch_alg": "sequential"}],
         4: [{"chunk_size": 8, "head_dim": 16, "dtype": "float32"}]}


# early_start (a GPU path) off the GPU: the runtime says why it does not apply and runs as magi
EARLY_MASKS = ("causal_document", "full")


def _cells(world_size: int) -> list[Cell]:
    masks = MASK_NAMES if world_size == 2 else CP4_MASKS
    early = [Cell("magi", m, {"early_start": e}, MASK_PARAMS.get(m, {}))
             for e in (True, "layout") for m in EARLY_MASKS] if world_size == 2 else []
    # dynamic_grid (a GPU kernel's grid, on by default) off: magi_static's arm, with the forward
    # cut by keys so the own keys' kernel runs beside the cast: exact as magi
    early += [Cell("magi", "causal_document", {"dynamic_grid": False, "cut": "fwd"})
              ] if world_size == 2 else []
    return [Cell("magi", m, knobs, MASK_PARAMS.get(m, {}))
            for knobs in KNOBS[world_size] for m in masks] + early


def _entry(rank, world_size, store_path, out_path, cells, problem):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world_size), rank=rank,
                            world_size=world_size)
    try:
        rows = check_cells(cells, problem)
        # bytes: one causal_document strategy, every rank's count and layout
        mask = build_mask("causal_document", problem.seqlen, doc_lens=problem.doc_lens)
        strategy = MagiAttention(mask, None, num_heads_q=problem.num_heads_q,
                                 num_heads_kv=problem.num_heads_kv, chunk_size=16)
        q, k, v = (torch.randn(problem.seqlen, h, problem.head_dim) for h in
                   (problem.num_heads_q, problem.num_heads_kv, problem.num_heads_kv))
        local = [strategy.shard(t).requires_grad_() for t in (q, k, v)]
        strategy.attention(*local).sum().backward()
        sent = [None] * world_size
        dist.all_gather_object(sent, dict(strategy.comm_bytes(),
                                          fused=strategy.key.runtime.meta.fused is not None))
        layouts = [[(r.start, r.end) for r in layout] for layout in strategy.layouts]
        early, layout_only = (MagiAttention(mask, None, num_heads_q=problem.num_heads_q,
                                            num_heads_kv=problem.num_heads_kv, chunk_size=16,
                                            early_start=e) for e in (True, "layout"))
        if rank == 0:
            torch.save({"rows": rows, "sent": sent, "layouts": layouts, "early": early.notes,
                        "layout_only": (layout_only.notes, layout_only.key.runtime.early_start,
                                        early.key.runtime.early_start)}, out_path)
    finally:
        dist.destroy_process_group()


@functools.cache
def _results(world_size: int, timeout_s: float = 240.0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = spawn(_entry, args=(world_size, f"{tmp}/store", f"{tmp}/out.pt",
                                               _cells(world_size), PROBLEM), nprocs=world_size, join=False)
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for proc in ctx.processes:
                    proc.kill()
                pytest.fail(f"gloo run with {world_size} processes timed out")
        return torch.load(f"{tmp}/out.pt", weights_only=False)


CASES = [pytest.param(ws, i, id=f"cp{ws}-{cell.id}") for ws in KNOBS
         for i, cell in enumerate(_cells(ws))]


@pytest.mark.parametrize("world_size,index", CASES)
def test_magi_matches_dense_oracle(world_size, index):
    row = _results(world_size)["rows"][index]
    if row["mask"] == "block_sparse" and row["status"] == "unsupported":
        pytest.fail(f"shared block_sparse must run: {row['message']}")
    assert row["status"] == "ok", f"{row['cell']}: {row['status']}: {row['message']}"


@pytest.mark.parametrize("world_size", list(KNOBS))
def test_magi_comm_bytes_equal_remote_kv_needed(world_size):
    """Fwd: every remote key a rank's queries need is received once, so the bytes all ranks
    send sum to the needed remote (k, v) tokens; bwd: the dkv reduce, plus the same cast again
    on the staged path (the fused path keeps the forward's KV buffer)."""
    res = _results(world_size)
    mask = build_mask("causal_document", SEQLEN, doc_lens=PROBLEM.doc_lens)
    dense = to_dense(mask.slices, SEQLEN).numpy()
    owner = np.empty(SEQLEN, dtype=np.int64)
    for rank, layout in enumerate(res["layouts"]):
        for start, end in layout:
            owner[start:end] = rank
    needed = 0
    for rank in range(world_size):
        keys = dense[owner == rank].any(axis=0)
        needed += int((keys & (owner != rank)).sum())
    token_bytes = 2 * PROBLEM.num_heads_kv * PROBLEM.head_dim * 4  # k and v, fp32
    assert sum(s["fwd"] for s in res["sent"]) == needed * token_bytes
    recasts = [0 if s["fused"] else 1 for s in res["sent"]]
    assert len(set(recasts)) == 1, res["sent"]  # every rank runs one plan
    assert sum(s["bwd"] for s in res["sent"]) == (1 + recasts[0]) * needed * token_bytes


@pytest.mark.parametrize("seqlen,cp_size,chunk_size,reason", [
    pytest.param(256, 2, None, None, id="auto-chunk"),
    pytest.param(256, 2, 48, "multiple of cp_size * chunk_size = 2 * 48", id="chunk-not-dividing"),
    pytest.param(200, 4, 16, "seqlen=200", id="seqlen-not-dividing"),
])
def test_supports_names_the_divisibility(seqlen, cp_size, chunk_size, reason):
    mask = build_mask("causal", seqlen)
    got = load_strategy("magi").supports(mask, 4, 2, cp_size, chunk_size=chunk_size)
    if reason is None:
        assert got is None
    else:
        assert reason in got


@pytest.mark.parametrize("knobs,match", [
    pytest.param({"dispatch_alg": "greedy"}, "dispatch_alg", id="dispatch_alg"),
    pytest.param({"num_stages": 0}, "num_stages", id="num_stages"),
    pytest.param({"fused": "yes"}, "fused", id="fused"),
    pytest.param({"cut": "sideways"}, "cut", id="cut"),
    pytest.param({"fused": True, "num_stages": 2}, "one stage", id="fused-stages"),
    pytest.param({"early_start": "yes"}, "early_start", id="early_start"),
    pytest.param({"dynamic_grid": "yes"}, "dynamic_grid", id="dynamic_grid"),
])
def test_bad_knob_values_raise_value_error(knobs, match):
    with pytest.raises(ValueError, match=match):
        MagiAttention.supports(build_mask("full", 256), 4, 2, 2, **knobs)


@pytest.mark.parametrize("seqlen,cp_size,expected", [
    (8192 * 4, 4, 512), (256 * 2, 2, 32), (1000, 8, 15)])
def test_default_chunk_size(seqlen, cp_size, expected):
    assert default_chunk_size(seqlen, cp_size) == expected


def test_early_start_layout_keeps_the_key_and_turns_the_launch_off():
    """early_start="layout": the key's runtime had early_start turned on (as magi_early's)
    and the strategy turned it off again; the row says so."""
    notes, layout_on, early_on = _results(2)["layout_only"]
    assert early_on and not layout_on
    assert notes.endswith("; early_start=layout only"), notes


def test_early_start_off_the_gpu_says_why_on_every_rank():
    """The row's early_start= note names each rank; on gloo / CPU neither rank applies it."""
    note = _results(2)["early"].split("early_start=")[1]
    assert note.startswith("r0:off (") and " / r1:off (" in note, note
