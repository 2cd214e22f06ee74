"""bench.plot draws flops_report.png per (mask, direction) from a results file made by a sweep."""
import io
import itertools

import matplotlib.image as mpimg
import numpy as np
import pytest
from PIL import Image

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
    """On the CPU no row records peak memory: no mem_report.png (the tables say why), and one
    an earlier call left is removed rather than left stale."""
    stale = tmp_path / "plots" / "causal" / "fwd" / "mem_report.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an empty figure")
    paths = plot.plot_results(results_dir, tmp_path / "plots")
    expected = {tmp_path / "plots" / m / d / "flops_report.png" for m in ("causal", "full")
                for d in ("fwd", "bwd")}
    assert set(paths) == expected and not stale.exists()
    png = tmp_path / "plots" / "causal" / "fwd" / "flops_report.png"
    assert png.stat().st_size > 10_000
    image = mpimg.imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert image[..., :3].std() > 0.05  # bars, labels and X markers, not a blank canvas


def test_cli(results_dir, tmp_path, capsys):
    plot.main(["--results", str(results_dir), "--out", str(tmp_path / "p")])
    assert "wrote 4 figures" in capsys.readouterr().out


def test_generic_x_column(tmp_path):
    import pandas as pd
    rows = pd.DataFrame({"cp_size": [1, 2, 1, 2], "kernel": ["magi", "magi", "ring", "ring"],
                         "tflops_per_s": [100.0, 180.0, 90.0, None],
                         "status": ["ok", "ok", "ok", "oom"], "message": ["", "", "", "OOM"]})
    path = barplot.plot_bars(rows, tmp_path / "cp.png", x="cp_size", title="cp")
    assert path.stat().st_size > 5_000


def test_a_png_figure_is_written_as_a_palette_image_of_the_same_pixels(tmp_path):
    import pandas as pd
    rows = pd.DataFrame({"cp_size": [1, 2, 1, 2], "kernel": ["magi", "magi", "ring", "ring"],
                         "tflops_per_s": [100.0, 180.0, 90.0, None],
                         "status": ["ok", "ok", "ok", "oom"], "message": ["", "", "", "OOM"]})
    fig = barplot.bar_figure(rows, x="cp_size", title="cp")
    rendered = io.BytesIO()
    fig.savefig(rendered, dpi=barplot.DPI, format="png")  # what matplotlib alone writes (RGBA)
    path = barplot.save_figure(fig, tmp_path / "cp.png")
    saved = Image.open(path)
    assert saved.mode == "P" and path.stat().st_size < len(rendered.getvalue())
    before = np.asarray(Image.open(rendered).convert("RGB"), dtype=int)
    after = np.asarray(saved.convert("RGB"), dtype=int)
    assert before.shape == after.shape
    diff = np.abs(before - after)
    # the same picture: off by under half a level on average, visibly only on a few edge pixels
    assert diff.mean() < 0.5 and (diff.max(axis=-1) > 16).mean() < 1e-3


def test_a_transparent_image_keeps_its_alpha():
    image = Image.new("RGBA", (4, 4), (255, 0, 0, 128))
    assert barplot.palette_png(image) is image


def test_cells_without_a_row_are_passed_as_the_experiments(tmp_path, monkeypatch):
    """A kernel with a fwd row but no bwd row at 128 (a sweep that stopped mid-cell): the bwd
    figure still gets 128 and that kernel, so the cell is drawn 'not measured'."""
    from dataclasses import replace

    from bench.cp import plot as cp_plot
    from bench.results import ResultRow, append_row

    BASE = ResultRow(run_id="r", time="2025-01-01T00:00:00+00:00", git_sha="abc", hardware="cpu",
                     gpu_name="cpu", torch_version="2", kernel_version="v", kernel="naive",
                     mask="causal", seqlen=64, batch=1, num_heads_q=2, num_heads_kv=1,
                     head_dim=16, dtype="float32", direction="fwd", cp_size=1, mask_area=1.0,
                     flops=1e9, runtime_ms=1.0, tflops_per_s=1.0, peak_mem_gb=None,
                     build_ms=None, status="ok", message="", env="")

    for seqlen, direction in ((64, "fwd"), (64, "bwd"), (128, "fwd")):
        append_row(tmp_path / "r" / "kernels" / "a.csv",
                   replace(BASE, kernel="ffa", seqlen=seqlen, direction=direction))
    append_row(tmp_path / "r" / "kernels" / "a.csv", replace(BASE, seqlen=64, direction="bwd"))
    calls = {}
    monkeypatch.setattr(plot, "write_figure", lambda rows, path, note, **kw: calls.setdefault(
        (path.parent.name, path.name), kw))
    plot.plot_results(tmp_path / "r", tmp_path / "p")
    bwd = calls["bwd", "flops_report.png"]
    assert bwd["xs"] == {64, 128} and bwd["names"] == ["naive", "ffa"]  # registry order

    for cp_size, direction in ((1, "fwd"), (2, "fwd"), (1, "bwd")):
        append_row(tmp_path / "c" / "cp" / "a.csv", replace(
            BASE, kernel="magi", seqlen=64 * cp_size, cp_size=cp_size, direction=direction))
    calls.clear()
    monkeypatch.setattr(cp_plot, "plot_bars", lambda rows, path, **kw: calls.setdefault(
        (path.parent.name, path.name), kw))
    cp_plot.plot_cp_results(tmp_path / "c" / "cp", tmp_path / "pc")
    assert calls["bwd", "flops_report_64_per_gpu.png"]["xs"] == {1, 2}


def test_a_kernel_keeps_its_place_and_colour_in_every_figure(tmp_path, monkeypatch):
    """Rows of two masks whose files list the kernels in different orders (and where one mask
    lacks a kernel): every figure orders its bars by the registry and draws a kernel in one
    colour, so figures can be compared at a glance."""
    import pandas as pd

    rows = []
    for mask, kernels in (("causal", ["flex", "ffa", "sdpa"]), ("full", ["ffa", "fa4", "flex"])):
        for kernel in kernels:
            for direction in ("fwd", "bwd"):
                rows.append(dict(run_id="r", time="2025-01-01T00:00:00+00:00", git_sha="abc",
                                 hardware="cpu", gpu_name="cpu", torch_version="2",
                                 kernel_version="v", kernel=kernel, mask=mask, seqlen=64, batch=1,
                                 num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32",
                                 direction=direction, cp_size=1, mask_area=1.0, flops=1e9,
                                 runtime_ms=1.0, tflops_per_s=1.0, peak_mem_gb=None,
                                 build_ms=None, status="ok", message="", env=""))
    (tmp_path / "r" / "kernels").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(tmp_path / "r" / "kernels" / "a.csv", index=False)
    calls = {}
    monkeypatch.setattr(plot, "write_figure", lambda rows, path, note, **kw: calls.setdefault(
        (path.parent.parent.name, path.parent.name, path.name), kw))
    plot.plot_results(tmp_path / "r", tmp_path / "p")
    causal, full = calls["causal", "fwd", "flops_report.png"], calls["full", "fwd", "flops_report.png"]
    assert causal["names"] == ["sdpa", "flex", "ffa"] and full["names"] == ["fa4", "flex", "ffa"]
    for kernel in ("flex", "ffa"):
        assert causal["colors"][kernel] == full["colors"][kernel]
    drawn = {causal["colors"][k] for k in ("sdpa", "flex", "ffa", "fa4")}
    assert len(drawn) == 4  # four kernels, four colours


def test_every_registered_kernel_has_a_colour_apart_from_every_other():
    """Any two kernels may share a figure (the dense sweep draws 13): no two registered kernels'
    colours are near (the registry-ordered palette drew sdpa and flex in two oranges). A custom
    kernel is not registered under its series name, so it takes the custom palette: two targets
    two colours, none a registered kernel's."""
    from bench.kernels import KERNEL_NAMES

    registered = [name for name in KERNEL_NAMES if name != "custom"]
    colors = barplot.series_colors(["custom:a:f", "mine", *registered],
                                   fixed=plot.KERNEL_COLORS, palette=plot.CUSTOM_COLORS)
    assert set(plot.KERNEL_COLORS) == set(registered)
    rgb = {name: np.array(color[:3]) for name, color in colors.items()}
    for a, b in itertools.combinations(rgb, 2):
        assert np.linalg.norm(rgb[a] - rgb[b]) >= 0.25, (a, b)
    assert colors["custom:a:f"] == plot.CUSTOM_COLORS[0] and colors["mine"] == plot.CUSTOM_COLORS[1]


def test_cp_runs_on_two_local_kernels_stay_apart(tmp_path, monkeypatch):
    """The same CP cells measured with FA4 and then with Triton as the local kernel: the tables
    and figures keep both runs (the newest run used to replace the other, unlabelled), and each
    ratio compares strategies on one local kernel."""
    import pandas as pd

    from bench.cp import plot as cp_plot

    rows = []
    for minute, local, tflops in ((1, "fa4", {"magi": 600.0, "ulysses": 500.0}),
                                  (2, "triton", {"magi": 300.0, "ulysses": 200.0})):
        for kernel, value in tflops.items():
            rows.append(dict(run_id=local, time=f"2025-01-01T00:0{minute}:00+00:00", git_sha="abc",
                             hardware="h", gpu_name="g", torch_version="2",
                             kernel_version=f"bench.cp.{kernel} local={local}", kernel=kernel,
                             mask="causal", seqlen=2048, batch=1, num_heads_q=2, num_heads_kv=1,
                             head_dim=16, dtype="bfloat16", direction="fwd", cp_size=2,
                             mask_area=1.0, flops=1e9, runtime_ms=1.0, tflops_per_s=value,
                             peak_mem_gb=None, build_ms=None, status="ok", message="", env=""))
    (tmp_path / "cp").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "cp" / "a.csv", index=False)
    table = cp_plot.ratio_table(tmp_path / "cp")
    ratios = dict(zip(table["local_kernel"], table["ratio"]))
    assert ratios == {"fa4": 600.0 / 500.0, "triton": 300.0 / 200.0}
    calls = {}
    monkeypatch.setattr(cp_plot, "plot_bars", lambda rows, path, **kw: calls.setdefault(
        path.name, (rows, kw)))
    cp_plot.plot_cp_results(tmp_path / "cp", tmp_path / "p")
    fa4_rows, fa4_kw = calls["flops_report_1k_per_gpu_fa4.png"]
    triton_rows, _ = calls["flops_report_1k_per_gpu_triton.png"]
    assert set(fa4_rows["tflops_per_s"]) == {600.0, 500.0}
    assert set(triton_rows["tflops_per_s"]) == {300.0, 200.0}
    assert "local fa4" in fa4_kw["title"]


def test_ratios_mark_baselines_whose_ranks_held_unequal_token_counts(tmp_path):
    """A baseline row whose message names unequal token shares (HybridCP's placement) is
    marked in the ratio table and the Markdown, with the shares; an equal-share one is not."""
    import pandas as pd

    from bench.cp import plot as cp_plot

    notes = {"magi": "", "ulysses": "comm_bytes_per_rank=8", "hybrid_cp":
             "gate: ok; comm_bytes_per_rank=0; tokens_per_rank=1024-3072"}
    rows = [dict(run_id="r", time="2025-01-01T00:01:00+00:00", git_sha="abc", hardware="h",
                 gpu_name="g", torch_version="2", kernel_version=f"bench.cp.{kernel}",
                 kernel=kernel, mask="causal_document", seqlen=4096, batch=1, num_heads_q=2,
                 num_heads_kv=1, head_dim=16, dtype="bfloat16", direction="fwd", cp_size=2,
                 mask_area=1.0, flops=1e9, runtime_ms=1.0, tflops_per_s=tf, peak_mem_gb=None,
                 build_ms=None, status="ok", message=notes[kernel], env="")
            for kernel, tf in (("magi", 500.0), ("ulysses", 400.0), ("hybrid_cp", 600.0))]
    (tmp_path / "cp").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "cp" / "a.csv", index=False)
    table = cp_plot.ratio_table(tmp_path / "cp")
    shares = dict(zip(table.baseline, table.baseline_tokens_per_rank))
    assert shares == {"hybrid_cp": "1024-3072", "ulysses": ""}
    _, md = cp_plot.write_ratios(tmp_path / "cp", tmp_path / "out")
    text = md.read_text()
    assert "| causal_document | 2 | 0.83* | 1.25 |" in text
    assert "tokens_per_rank 1024-3072" in text


def test_a_note_naming_the_source_files_stays_on_the_canvas(tmp_path, monkeypatch):
    """A job's figure names the files its rows came from under the axes: long paths are
    wrapped and the layout makes room, so no text is clipped."""
    import pandas as pd

    rows = pd.DataFrame({"seqlen": [256, 512, 256, 512],
                         "kernel": ["sdpa_math", "sdpa_math", "custom:my_kernels:good",
                                    "custom:my_kernels:good"],
                         "tflops_per_s": [1.0, 2.0, 1.5, 2.5], "status": ["ok"] * 4,
                         "message": [""] * 4})
    source = "/home/user/project/runs/cpu/kernels/" + "default__kernel=_sdpa_math,custom_" * 3
    note = [f"rows from {source}.csv: sdpa_math (seqlen 256); custom:my_kernels:good (seqlen 256)"]
    figures = []
    monkeypatch.setattr(plot, "save_figure", lambda fig, path: figures.append(fig) or path)
    plot.write_figure(rows, tmp_path / "f.png", note, title="causal fwd")
    (fig,) = figures
    texts = [t for t, _ in barplot.text_boxes(fig)]
    drawn = " ".join(t.get_text().replace("\n", " ").replace("     ", " ") for t in texts)
    assert "default__kernel=_sdpa_math,custom_" in drawn and "(seqlen 256)" in drawn
    assert barplot.texts_outside_canvas(fig) == []


def test_no_memory_figure_where_every_cell_failed(tmp_path):
    """A figure group whose cells all failed (FlexAttention's backward on the CPU): the TFLOPs/s
    figure carries the marks; a memory figure would only repeat them."""
    import pandas as pd

    rows = pd.DataFrame({"hardware": "cpu", "gpu_name": "cpu", "mask": "causal", "direction": "bwd",
                         "cp_size": 1, "seqlen": [64, 128], "kernel": "flex", "dtype": "float32",
                         "num_heads_q": 2, "num_heads_kv": 1, "head_dim": 16,
                         "tflops_per_s": None, "peak_mem_gb": None, "time": "t",
                         "status": "unsupported", "message": "no backward on the CPU"})
    paths = plot.plot_results(rows, tmp_path / "p")
    assert paths == [tmp_path / "p" / "causal" / "bwd" / "flops_report.png"]
