"""Every CP strategy, over gloo with 2 and 4 processes, against single-device attention.

One process group per world size runs every (strategy, mask) cell (bench.cp.verify); each cell
is then asserted as its own test: claimed masks must match the fp64 dense oracle in output and
in dq, dk, dv (gathered back to global order), the others must be reported unsupported with a
reason. S = 250 with uneven documents so that shards differ in length.
"""
from __future__ import annotations

import functools
import tempfile
import time

import pytest
import torch

from magi_attention.testing.processes import spawn
from bench.cp import STRATEGIES, load_strategy
from bench.cp.verify import Cell, Problem, gloo_entry, strategy_label
from bench.data import sample_doc_lens
from bench.masks import MASK_NAMES, build_mask

from ._small_masks import SMALL_MASK_PARAMS as MASK_PARAMS

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

PROBLEM = Problem(seqlen=250, num_heads_q=4, num_heads_kv=2, head_dim=16,
                  doc_lens=tuple(sample_doc_lens(250, seed=8, cap_ratio=0.5)))

PER_HEAD = {"block_q": 32, "block_k": 32, "num_heads_kv": PROBLEM.num_heads_kv}

CONFIGS = {
    # cp 1: the single-GPU reference, and the baselines' one-member paths (no merge, no gather)
    1: [("single_gpu", {}), ("ulysses", {}), ("ring_p2p", {}), ("ring_allgather", {}),
        ("hybrid_cp", {})],
    2: [("ulysses", {}), ("ring_p2p", {}), ("ring_allgather", {}), ("usp", {}),
        ("usp", {"ulysses_degree": 2}), ("loongtrain", {}),
        ("loongtrain", {"head_parallel_degree": 1, "window_size": 2}), ("hybrid_cp", {}),
        ("hybrid_cp", {"token_capacity": 1.0})],
    4: [("ulysses", {}), ("ring_p2p", {}), ("ring_allgather", {}), ("usp", {}),
        ("loongtrain", {}), ("loongtrain", {"head_parallel_degree": 1, "window_size": 2}),
        ("hybrid_cp", {}), ("hybrid_cp", {"token_capacity": 1.0})],
}

# (strategy, mask) pairs a strategy must refuse; "*" = every strategy
UNSUPPORTED = {("*", "block_sparse_per_head"), ("hybrid_cp", "share_question"),
               ("hybrid_cp", "causal_blockwise")}


def _cells(world_size: int) -> list[tuple[str, Cell]]:
    out = []
    for name, knobs in CONFIGS[world_size]:
        for mask in MASK_NAMES:
            out.append((mask, Cell(name, mask, knobs, MASK_PARAMS.get(mask, {}))))
        out.append(("block_sparse_per_head", Cell(name, "block_sparse", knobs, PER_HEAD)))
    return out


def _run(world_size: int, cells: list[Cell], timeout_s: float = 240.0) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = spawn(gloo_entry, args=(world_size, f"{tmp}/store", f"{tmp}/rows.pt",
                                                   cells, PROBLEM), nprocs=world_size, join=False)
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for proc in ctx.processes:
                    proc.kill()
                pytest.fail(f"gloo run with {world_size} processes did not finish in "
                            f"{timeout_s:.0f} s (a rank is stuck in a collective)")
        return torch.load(f"{tmp}/rows.pt", weights_only=False)


@functools.cache
def _results(world_size: int) -> list[dict]:
    return _run(world_size, [cell for _, cell in _cells(world_size)])


CASES = [pytest.param(ws, i, label, id=f"cp{ws}-{strategy_label(cell.strategy, cell.knobs)}-{label}")
         for ws in CONFIGS for i, (label, cell) in enumerate(_cells(ws))]


@pytest.mark.parametrize("world_size,index,mask_label", CASES)
def test_strategy_matches_single_device(world_size, index, mask_label):
    row = _results(world_size)[index]
    refused = ("*", mask_label) in UNSUPPORTED or (row["strategy"], mask_label) in UNSUPPORTED
    if refused:
        assert row["status"] == "unsupported", f"{row['cell']} should be refused, got {row}"
        assert row["message"], f"{row['cell']}: unsupported without a reason"
        return
    assert row["status"] == "ok", (f"{row['cell']} (cp_size={world_size}): {row['status']}: "
                                   f"{row['message']}\n{row.get('traceback', '')}")
    if world_size > 1 and (row["strategy"] != "hybrid_cp" or row["mask"] in ("full", "causal")):
        # HybridCP keeps short documents on one rank: no traffic is the right answer there
        assert row["comm_bytes"]["fwd"] > 0 and row["comm_bytes"]["bwd"] > 0, row["comm_bytes"]


def _mask(name="causal", **params):
    return build_mask(name, 64, doc_lens=[16, 48], **params)


@pytest.mark.parametrize("name,knobs,num_heads_q,cp_size,expect", [
    ("ulysses", {}, 6, 4, "num_heads_q=6"),
    ("usp", {"ulysses_degree": 3}, 6, 4, "ulysses_degree=3"),
    ("usp", {"ring_degree": 2, "ulysses_degree": 4}, 8, 4, "!= cp_size=4"),
    ("loongtrain", {"head_parallel_degree": 1, "window_size": 3}, 4, 4, "window_size=3"),
    ("hybrid_cp", {}, 4, 6, "power of two"),
    ("single_gpu", {}, 4, 2, "cp_size 1 only"),
], ids=["ulysses-heads", "usp-degree", "usp-product", "loongtrain-window", "hybrid-cp_size",
        "single_gpu-cp_size"])
def test_unsupported_configurations_give_a_reason(name, knobs, num_heads_q, cp_size, expect):
    reason = load_strategy(name).supports(_mask(), num_heads_q, 2, cp_size, **knobs)
    assert isinstance(reason, str) and expect in reason, reason


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_unknown_knob_is_a_type_error(name):
    with pytest.raises(TypeError, match="unknown knobs"):
        load_strategy(name).supports(_mask(), 4, 2, 2, no_such_knob=1)
