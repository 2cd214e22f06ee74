"""``python -m bench.cp.predict``: rows with status predicted, figures, one-line errors; and the
validation's helpers."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from _cli import python_m

from bench.cp.predict.validation import parse_spec, ranking

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[4]


def _run(tmp_path, *overrides):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*python_m("bench.cp.predict"), *overrides,
                           f"out_dir={tmp_path / 'rows'}", f"plots_dir={tmp_path / 'plots'}",
                           f"results_root={ROOT / 'results'}", f"hydra.run.dir={tmp_path / 'hydra'}"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)


def test_a_prediction_run_writes_predicted_rows_and_hatched_figures(tmp_path):
    done = _run(tmp_path, "cp=[magi,ring_p2p,ulysses]", "mask=[causal]", "cp_sizes=[2,16]",
                "seqlen_per_gpu=[2048]", "gpus_per_node=8", "details=true")
    assert done.returncode == 0, done.stderr[-2000:]
    folder = tmp_path / "rows" / "cp_predicted"
    files = [f for f in folder.glob("cp_scale_out*.csv") if not f.stem.endswith("_ranks")]
    assert len(files) == 1 and (tmp_path / "rows" / "cp_predicted" / "rate_table.csv").exists()
    rows = pd.read_csv(files[0])
    assert set(rows["status"]) == {"predicted"} and len(rows) == 3 * 2 * 2
    assert (rows["tflops_per_s"] > 0).all() and (rows["gpu_name"] == "predicted").all()
    # 16 ranks on two nodes: Ulysses' all-to-all crosses the network, cp 2 stays on NVLink
    ulysses = rows[(rows["kernel"] == "ulysses") & (rows["direction"] == "fwd")].set_index("cp_size")
    assert "network_bytes_per_rank=0;" in ulysses.loc[2, "message"]
    assert "network_bytes_per_rank=0;" not in ulysses.loc[16, "message"]
    assert (tmp_path / "plots" / "causal" / "fwd" / "flops_report_2k_per_gpu.png").exists()
    assert (tmp_path / "plots" / "scale_out_2k_per_gpu.png").exists()
    # details: every rank's stages; the ranks' areas add up to the mask's (heads weighed)
    ranks = pd.read_csv(files[0].with_name(files[0].stem + "_ranks.csv"))
    total = ranks.groupby(["kernel", "cp_size", "direction"])["area"].sum()
    area = rows.groupby(["kernel", "cp_size", "direction"])["mask_area"].first()
    assert ((total / area.loc[total.index] - 1).abs() < 1e-9).all()
    sent = ranks.groupby(["kernel", "cp_size", "direction", "rank"])[
        ["sent_nvlink_bytes", "sent_network_bytes"]].sum().sum(axis=1)
    most = sent.groupby(["kernel", "cp_size", "direction"]).max()
    stated = rows.set_index(["kernel", "cp_size", "direction"])["message"].str.extract(
        r"comm_bytes_per_rank=(\d+)", expand=False).astype(int)
    assert (most.loc[stated.index] == stated).all()


@pytest.mark.parametrize("override,expect", [("cp_sizes=[512]", "cp_sizes must be at most 256"),
                                             ("local_kernel=reference", "local_kernel must be"),
                                             ("links.network_gb_per_s=0", "network_gb_per_s")])
def test_a_bad_setting_is_one_error_line(tmp_path, override, expect):
    done = _run(tmp_path, override, "mask=[causal]", "cp=[magi]")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error:") and expect in done.stderr


def test_parse_spec_gives_name_and_knobs():
    assert parse_spec("magi[balance=timed,chunk_size=32,dynamic_grid=True,local_kernel=fa4]") == (
        "magi", {"balance": "timed", "chunk_size": 32, "dynamic_grid": True})
    assert parse_spec("hybrid_cp[local_kernel=triton]") == ("hybrid_cp", {})


def test_ranking_skips_ties_and_names_the_predicted_best():
    cells = []
    for kernel, measured, predicted in (("magi", 500, 480), ("ulysses", 400, 490), ("usp", 200, 100)):
        for seqlen in (4096, 8192):
            m = measured if seqlen == 4096 else (490 if kernel == "ulysses" else measured)
            cells.append(dict(hardware_dir="h", local_kernel="fa4", kernel=kernel, mask="causal",
                              seqlen=seqlen, cp_size=2, direction="fwd",
                              measured_tflops_per_s=m, predicted_tflops_per_s=predicted))
    table = ranking(pd.DataFrame(cells)).set_index("seqlen")
    assert not table.loc[4096, "tie"] and not table.loc[4096, "right"]  # ulysses predicted best
    assert table.loc[8192, "tie"]  # 500 against 490: within 3%


def test_magis_timed_choice_margins_are_the_keys_own():
    """The predictor keeps the faster way of magi's timed choices by the margins the key
    uses (its copies of them must follow the library's)."""
    from bench.cp.predict import predictor
    from magi_attention.api import _tune_cut, _tune_dispatch
    assert predictor.CUT_MIN_GAIN == _tune_cut.MIN_GAIN
    assert predictor.DISPATCH_MIN_GAIN == _tune_dispatch.MIN_GAIN
    assert predictor.UNEQUAL_CHUNK == _tune_dispatch.UNEQUAL_CHUNK
