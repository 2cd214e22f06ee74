"""bench.status tells an absent package (missing) from a real limit (unsupported)."""
import pandas as pd
import pytest

from bench.status import MISSING, UNSUPPORTED, experiment_cells, unsupported_status, with_missing


@pytest.mark.parametrize("reason", [
    "ModuleNotFoundError: No module named 'flash_attn_interface'",
    "paddle not importable: No module named 'paddle'",
    "BackendUnavailable: backend 'fa4' needs flash-attn-4, which cannot be imported (x)",
], ids=["exception", "adapter-probe", "backend"])
def test_absent_package_is_missing(reason):
    assert unsupported_status(reason) == MISSING


@pytest.mark.parametrize("reason", [
    "this SDPA backend takes no attn_mask; full_document needs one",
    "needs a CUDA device",
    "NotImplementedError: FlexAttention does not support float64",
], ids=["mask", "device", "dtype"])
def test_real_limit_stays_unsupported(reason):
    assert unsupported_status(reason) == UNSUPPORTED


def test_old_rows_are_relabelled_only_where_a_package_is_absent():
    rows = pd.DataFrame({"status": ["unsupported", "unsupported", "error", "ok"],
                         "message": ["paddle not importable: No module named 'paddle'",
                                     "needs a CUDA device", "No module named 'x'", ""]})
    assert with_missing(rows)["status"].tolist() == ["missing", "unsupported", "error", "ok"]
    assert rows["status"].iloc[0] == "unsupported"  # the caller's frame is left alone


def test_experiment_cells_span_both_directions():
    rows = pd.DataFrame({"mask": ["causal"] * 3 + ["full"],
                         "direction": ["fwd", "fwd", "bwd", "fwd"],
                         "seqlen": [1024, 2048, 4096, 1024],
                         "kernel": ["ffa", "fa4", "flex", "ffa"]})
    cells = experiment_cells(rows, ["mask"], "seqlen", "kernel")
    assert cells[("causal",)] == ({1024, 2048, 4096}, ["ffa", "fa4", "flex"])
    assert cells[("full",)] == ({1024}, ["ffa"])
