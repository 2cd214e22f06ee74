"""The rate table: tile counts against the planner, and the fit against rows of a known law."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.cp.predict.ops import Kernel
from bench.cp.predict.rates import _features, _mask_slices, fit_rate_model, host_scale
from bench.cp.predict.tiles import tile_counts
from bench.data import sample_doc_lens
from bench.masks import build_mask
from magi_attention.common.slice_array import SliceArray
from magi_attention.kernels.block_sparse import plan_for
from magi_attention.kernels.plan import FlexAttnPlan

MASKS = ("full", "causal", "causal_document", "sliding_window_causal", "share_question")


@pytest.mark.parametrize("name", MASKS)
def test_tile_counts_equal_the_planners_grid(name):
    """Where the grid plan is the one counted (FA4's bitmap path; any mask at tiles a slice
    bound never cuts), q tiles with work, full and partial pairs equal the kernel planner's."""
    seqlen = 4096
    mask = build_mask(name, seqlen, doc_lens=sample_doc_lens(seqlen, seed=0))
    slices = SliceArray.from_slices(list(mask.slices))
    plan = plan_for(FlexAttnPlan(slices, seqlen, seqlen), 128, 128)
    counts = tile_counts(slices, seqlen, seqlen, "fa4", "fwd")
    assert counts.area == plan.area
    if not counts.native:
        assert counts.full == plan.full_pairs
        assert counts.pairs == plan.num_tile_pairs
        assert counts.q_tiles == int((np.diff(plan.q_tile_ptr.numpy()) > 0).sum())
    assert counts.partial_intervals >= counts.partial


def test_a_partial_tile_never_costs_less_than_a_full_one():
    full = build_mask("full", 2048)
    causal = build_mask("causal", 2048)
    for backend in ("fa4", "triton"):
        f, c = (_features(tile_counts(SliceArray.from_slices(list(m.slices)), 2048, 2048,
                                      backend, "fwd"), 64, backend) for m in (full, causal))
        # causal visits fewer pairs; its partial ones count as a pair plus their masking
        assert c[2] < f[2] and (c[3:] > 0).any()


# a linear law per (backend, direction): us per feature of rates._features
TRUTH = {("fa4", "fwd"): np.array([5.0, 2.0, 0.8, 0.3, 1.5]),
         ("fa4", "bwd"): np.array([9.0, 7.0, 2.0, 0.8, 4.0]),
         ("triton", "fwd"): np.array([60.0, 1.0, 0.9, 0.2]),
         ("triton", "bwd"): np.array([200.0, 4.0, 1.3, 0.1])}


def _rows(truth: dict, gpu: str) -> pd.DataFrame:
    """Kernel-benchmark rows whose runtimes follow ``truth`` exactly."""
    rows = []
    for backend, kernel in (("fa4", "ffa_fa4"), ("triton", "ffa")):
        for direction in ("fwd", "bwd"):
            for mask in ("full", "causal", "causal_document", "full_document",
                         "sliding_window_causal"):
                for seqlen in (4096, 8192, 16384):
                    counts = tile_counts(_mask_slices(mask, seqlen, 8), seqlen, seqlen, backend,
                                         direction)
                    us = float(_features(counts, 64, backend) @ truth[backend, direction])
                    rows.append(dict(run_id="r", time="2025-01-01T00:00:00+00:00",
                                     git_sha="abc", hardware=gpu, gpu_name="g",
                                     torch_version="2", kernel_version="v", kernel=kernel,
                                     mask=mask, seqlen=seqlen, batch=1, num_heads_q=64,
                                     num_heads_kv=8, head_dim=128, dtype="bfloat16",
                                     direction=direction, cp_size="", mask_area=1.0,
                                     flops=1.0, runtime_ms=us / 1e3, tflops_per_s=1.0,
                                     peak_mem_gb="", build_ms="", status="ok", message="",
                                     env=""))
    return pd.DataFrame(rows)


def test_the_fit_recovers_a_linear_law(tmp_path):
    (tmp_path / "gpu" / "kernels").mkdir(parents=True)
    _rows(TRUTH, "gpu").to_csv(tmp_path / "gpu" / "kernels" / "k.csv", index=False)
    model = fit_rate_model(tmp_path, "gpu")
    assert np.abs(model.rows["error"]).max() < 1e-6
    # and a call it never saw: a ring step's block of causal_document, 32 heads
    mask = build_mask("causal_document", 8192, doc_lens=sample_doc_lens(8192, seed=3))
    slices = SliceArray.from_slices(list(mask.slices)).take(slice(0, 5))
    call = Kernel(slices, 8192, 8192, 32)
    for (backend, direction), coef in TRUTH.items():
        counts = tile_counts(slices, 8192, 8192, backend, direction)
        want = float(_features(counts, 32, backend) @ coef)
        assert model.kernel_us(call, backend, direction) == pytest.approx(want, rel=1e-3)


def test_no_single_gpu_rows_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no single-GPU rows"):
        fit_rate_model(tmp_path, "nowhere")


def test_host_scale_prices_a_machine_at_its_own_cp1_speed(tmp_path):
    """A machine whose cp 1 rows run the law 1.25x slower (fwd) and 0.8x (bwd) on one backend
    gets exactly those scales; the pooled table and the other backend keep scale 1."""
    (tmp_path / "gpu" / "kernels").mkdir(parents=True)
    _rows(TRUTH, "gpu").to_csv(tmp_path / "gpu" / "kernels" / "k.csv", index=False)
    model = fit_rate_model(tmp_path, "gpu")
    slow = _rows(TRUTH, "gpu")
    slow = slow[slow["kernel"] == "ffa_fa4"].assign(
        cp_size=1, kernel="ring_p2p", kernel_version="bench.cp.ring_p2p local=fa4")
    slow["runtime_ms"] *= np.where(slow["direction"] == "fwd", 1.25, 0.8)
    (tmp_path / "gpux2" / "cp").mkdir(parents=True)
    slow.to_csv(tmp_path / "gpux2" / "cp" / "cp.csv", index=False)
    host = host_scale(model, tmp_path, "gpux2")
    assert host.scale == pytest.approx({("fa4", "fwd"): 1.25, ("fa4", "bwd"): 0.8})
    call = Kernel(_mask_slices("causal", 8192, 8), 8192, 8192, 64)
    assert host.kernel_us(call, "fa4", "fwd") == pytest.approx(
        1.25 * model.kernel_us(call, "fa4", "fwd"))
    assert host.kernel_us(call, "triton", "bwd") == model.kernel_us(call, "triton", "bwd")
    assert host_scale(model, tmp_path, "elsewhere") is model


def test_validation_sets_a_measured_cell_beside_its_prediction(tmp_path, monkeypatch):
    """A cp 2 ring cell measured at exactly the predicted time has error 0, names the measured
    row's file and commit, and records the commit and time the prediction was made at."""
    from bench.cp.predict import validation
    (tmp_path / "h100" / "kernels").mkdir(parents=True)
    _rows(TRUTH, "h100").to_csv(tmp_path / "h100" / "kernels" / "k.csv", index=False)
    cell = _rows(TRUTH, "h100")
    cell = cell[(cell["kernel"] == "ffa_fa4") & (cell["mask"] == "causal")
                & (cell["seqlen"] == 8192)].assign(
        cp_size=2, kernel="ring_p2p", kernel_version="bench.cp.ring_p2p local=fa4",
        spec="ring_p2p[local_kernel=fa4]", git_sha="0123456789ab")
    (tmp_path / "h100x2" / "cp").mkdir(parents=True)
    measured = tmp_path / "h100x2" / "cp" / "cp.csv"
    cell.to_csv(measured, index=False)
    monkeypatch.setattr(validation, "current", lambda: type("P", (), {"label": "feed1234"})())
    first = validation.validate(tmp_path, "h100x2")
    predicted = first.set_index("direction")
    for column in ("runtime_ms", "tflops_per_s"):
        cell[column] = cell["direction"].map(predicted[f"predicted_{column}"])
    cell.to_csv(measured, index=False)
    table = validation.validate(tmp_path, "h100x2")
    assert sorted(table["direction"]) == ["bwd", "fwd"]
    assert table["error"].abs().max() < 1e-9
    assert set(table["measured_file"]) == {str(measured)}
    assert set(table["measured_commit"]) == {"0123456789ab"}
    assert set(table["git_sha"]) == {"feed1234"} and table["time"].str.startswith("20").all()
