"""bench.plot draws flops_report.png per (mask, direction) from a results file made by a sweep."""
import matplotlib.image as mpimg
import pytest

from bench import barplot, plot
from bench.config import GateConfig, HardwareConfig, KernelBenchConfig, KernelChoice, MaskChoice
from bench.kernels.runner import run_sweep

HARDWARE = HardwareConfig(name="cpu", device="cpu", seqlens=(64,), batch=1, num_heads_q=2,
                          num_heads_kv=1, head_dim=16, dtype="float32",
                          kernels=("naive",), warmup=0, repeat=1)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    config = KernelBenchConfig(
        hardware=HARDWARE, kernels=(KernelChoice("naive", "naive"), KernelChoice("sdpa_math", "sdpa_math"),
                                    KernelChoice("fa4", "fa4")),
        masks=(MaskChoice("causal", "causal"), MaskChoice("full", "full")), seqlens=(64, 128),
        gate=GateConfig(full_max_seqlen=128), out_file=root / "results" / "kernels" / "t.csv")
    run_sweep(config)
    return root / "results"


def test_flops_report_per_mask_and_direction(results_dir, tmp_path):
    paths = plot.plot_results(results_dir, tmp_path / "plots")
    expected = {tmp_path / "plots" / m / d / f for m in ("causal", "full") for d in ("fwd", "bwd")
                for f in ("flops_report.png", "mem_report.png")}
    assert set(paths) == expected
    png = tmp_path / "plots" / "causal" / "fwd" / "flops_report.png"
    assert png.stat().st_size > 10_000
    image = mpimg.imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert image[..., :3].std() > 0.05  # bars, labels and X markers, not a blank canvas


def test_cli(results_dir, tmp_path, capsys):
    plot.main(["--results", str(results_dir), "--out", str(tmp_path / "p")])
    assert "wrote 8 figures" in capsys.readouterr().out


def test_generic_x_column(tmp_path):
    import pandas as pd
    rows = pd.DataFrame({"cp_size": [1, 2, 1, 2], "kernel": ["magi", "magi", "ring", "ring"],
                         "tflops_per_s": [100.0, 180.0, 90.0, None],
                         "status": ["ok", "ok", "ok", "oom"], "message": ["", "", "", "OOM"]})
    path = barplot.plot_bars(rows, tmp_path / "cp.png", x="cp_size", title="cp")
    assert path.stat().st_size > 5_000
