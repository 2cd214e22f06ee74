"""bench.report merges result files into per-(mask, direction) tables, kernels as columns."""
from dataclasses import replace

import pandas as pd
import pytest

from bench import report
from bench.results import ResultRow, append_row, done_cells, latest_rows, read_results

BASE = ResultRow(run_id="r", time="2025-01-01T00:00:00+00:00", git_sha="abc", hardware="cpu",
                 gpu_name="cpu", torch_version="2", kernel_version="v", kernel="naive",
                 mask="causal", seqlen=256, batch=1, num_heads_q=2, num_heads_kv=1, head_dim=16,
                 dtype="float32", direction="fwd", cp_size=1, mask_area=1.0, flops=1e9,
                 runtime_ms=1.0, tflops_per_s=1.0, peak_mem_gb=None, build_ms=None, status="ok",
                 message="", env="")


@pytest.fixture
def results_dir(tmp_path):
    """Two job files of one experiment, one re-measured cell, one OOM and one unsupported cell."""
    folder = tmp_path / "results" / "kernels"
    for seqlen, tf in ((256, 1.5), (512, 2.5)):
        append_row(folder / "exp__job=a.csv", replace(BASE, seqlen=seqlen, tflops_per_s=tf))
        append_row(folder / "exp__job=b.csv", replace(BASE, kernel="ffa", seqlen=seqlen, tflops_per_s=3.0))
    append_row(folder / "exp__job=a.csv", replace(BASE, seqlen=512, tflops_per_s=4.0,
                                             time="2025-01-02T00:00:00+00:00"))  # newer wins
    append_row(folder / "exp__job=b.csv", replace(BASE, kernel="fa4", status="unsupported",
                                             message="needs a CUDA device", tflops_per_s=None))
    append_row(folder / "exp__job=b.csv", replace(BASE, kernel="fa4", seqlen=512, status="oom",
                                             message="OutOfMemoryError", tflops_per_s=None))
    return folder


def test_latest_row_per_cell_and_done_cells(results_dir):
    frame = latest_rows(read_results(results_dir))
    assert len(frame) == 6
    naive_512 = frame[(frame.kernel == "naive") & (frame.seqlen == 512)]
    assert naive_512.tflops_per_s.tolist() == [4.0]
    assert len(done_cells(results_dir)) == 6


def test_write_tables_markdown_and_csv(results_dir, tmp_path):
    out = tmp_path / "tables"
    report.write_tables(results_dir, out)
    csv = pd.read_csv(out / "tflops_per_s_cpu_causal_fwd_1.csv", index_col=0)
    assert list(csv.columns) == ["naive", "ffa"]  # only ok values; kernels in first-seen order
    assert csv.loc[512, "naive"] == 4.0 and csv.loc[256, "ffa"] == 3.0
    md = (out / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| seqlen | naive | ffa | fa4 |" in md
    assert "| 256 | 1.5 | 3 | X (unsupported) |" in md and "X (oom)" in md
    assert "- fa4 (unsupported): needs a CUDA device" in md
    assert (out / "README.md").read_text().count("## ") == 2  # TFLOPs/s and memory


def test_cli(results_dir, tmp_path, capsys):
    report.main(["--results", str(results_dir), "--out", str(tmp_path / "t")])
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "t" / "peak_mem_gb_cpu_causal_fwd_1.md").exists()


def test_missing_results_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        read_results(tmp_path / "does_not_exist")


def test_bad_status_is_rejected():
    with pytest.raises(ValueError, match="status"):
        replace(BASE, status="fine")


def test_hardware_folder_means_its_kernel_rows(tmp_path):
    root = tmp_path / "results" / "h"
    append_row(root / "kernels" / "a.csv", BASE)
    append_row(root / "cp" / "a.csv", replace(BASE, kernel="magi", cp_size=2))
    report.write_tables(root, tmp_path / "t")
    text = (tmp_path / "t" / "README.md").read_text()
    assert "naive" in text and "magi" not in text
    report.write_tables(root, tmp_path / "all", kind=None)
    assert "magi" in (tmp_path / "all" / "README.md").read_text()


def test_missing_package_and_not_measured_cells(results_dir, tmp_path):
    """A peer without its package is 'X (missing)', also in rows written before that status
    existed; a cell of the sweep with no row (here fa3 at 512, bwd at 256) is 'not measured'."""
    append_row(results_dir / "exp__job=c.csv", replace(BASE, kernel="fa3", status="missing",
                                                  message="No module named 'flash_attn_interface'"))
    append_row(results_dir / "exp__job=c.csv", replace(BASE, kernel="flashmask", status="unsupported",
                                                  message="paddle not importable: No module named 'paddle'"))
    append_row(results_dir / "exp__job=c.csv", replace(BASE, kernel="flashmask", seqlen=512,
                                                  direction="bwd", status="missing", message="x"))
    report.write_tables(results_dir, tmp_path / "t")
    fwd = (tmp_path / "t" / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| seqlen | naive | ffa | fa4 | fa3 | flashmask |" in fwd
    assert "| 256 | 1.5 | 3 | X (unsupported) | X (missing) | X (missing) |" in fwd
    assert "| 512 | 4 | 3 | X (oom) | not measured | not measured |" in fwd
    bwd = (tmp_path / "t" / "tflops_per_s_cpu_causal_bwd_1.md").read_text()
    assert "| 256 | not measured | not measured | not measured | not measured | not measured |" in bwd


def test_a_folder_gives_one_experiment_not_every_csv(results_dir, tmp_path, capsys):
    adhoc = replace(BASE, kernel="custom", tflops_per_s=9.0)
    append_row(results_dir / "adhoc__kernel=custom.csv", adhoc)  # another experiment
    (results_dir / "died_before_its_header.csv").write_bytes(b"")  # no rows: no experiment
    with pytest.raises(ValueError, match=r"several experiments \(adhoc, exp\); choose one with"):
        report.write_tables(results_dir, tmp_path / "t")
    report.write_tables(results_dir, tmp_path / "exp", experiment="exp")
    assert "custom" not in (tmp_path / "exp" / "README.md").read_text()
    report.main(["--results", str(results_dir), "--experiment", "adhoc", "--out", str(tmp_path / "a")])
    text = (tmp_path / "a" / "README.md").read_text()
    assert "custom" in text and "naive" not in text
    with pytest.raises(SystemExit):
        report.main(["--results", str(results_dir), "--out", str(tmp_path / "x")])
    assert "holds the rows of several experiments" in capsys.readouterr().err
    files = sorted(map(str, results_dir.glob("*.csv")))  # files given by name: merged as given
    report.main(["--results", *files, "--out", str(tmp_path / "all")])
    assert "custom" in (tmp_path / "all" / "README.md").read_text()


def test_cpu_peak_memory_table_says_why_it_is_empty(results_dir, tmp_path):
    report.write_tables(results_dir, tmp_path / "t")
    md = (tmp_path / "t" / "peak_mem_gb_cpu_causal_fwd_1.md").read_text()
    assert "not recorded: these rows ran on the CPU" in md and "| seqlen |" not in md
    gpu = tmp_path / "gpu"
    append_row(gpu / "g.csv", replace(BASE, gpu_name="NVIDIA H200", peak_mem_gb=1.25))
    report.write_tables(gpu, tmp_path / "g")
    assert "| 256 | 1.25 |" in (tmp_path / "g" / "peak_mem_gb_cpu_causal_fwd_1.md").read_text()


def test_help_text_is_whole_sentences(capsys):
    with pytest.raises(SystemExit):
        report.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert report.DESCRIPTION in help_text and report.DESCRIPTION.endswith(".")


def test_cp_tables_keep_each_tokens_per_gpu_apart(tmp_path):
    # cp 1 and 2 at 16k and 64k tokens a GPU: a table per tokens-a-GPU, never the last row of
    # either size under one cp_size (a CP row's seqlen is the whole sequence)
    folder = tmp_path / "results" / "cp"
    for per_gpu, tf in ((16384, 100.0), (65536, 200.0)):
        for cp in (1, 2):
            append_row(folder / "cp.csv", replace(BASE, kernel="magi", cp_size=cp,
                                                  seqlen=per_gpu * cp, tflops_per_s=tf + cp))
    out = tmp_path / "tables"
    report.write_tables(folder, out, x="cp_size", kind=None)
    for per_gpu, tf in ((16384, 100.0), (65536, 200.0)):
        csv = pd.read_csv(out / f"tflops_per_s_cpu_{per_gpu}_causal_fwd.csv", index_col=0)
        assert csv["magi"].to_dict() == {1: tf + 1, 2: tf + 2}


def _custom(kernel: str, target: str, source: str, tflops: float, time: str = BASE.time):
    return replace(BASE, kernel=kernel, kernel_version=target, tflops_per_s=tflops, time=time,
                   spec=f"custom[target={target}@sha1:{source}]")


def test_custom_targets_never_share_a_column(tmp_path, capsys):
    """Three targets across a user's jobs, one of them written under the bare label 'custom'
    (as rows were before the label named the target), and a row older than the spec column:
    one column per target, each with its own value."""
    folder = tmp_path / "runs" / "cpu" / "kernels"
    append_row(folder / "default.csv", _custom("custom", "examples.custom_kernel.my_attn:my_attention",
                                               "aaaaaaaaaa", 1.0))
    append_row(folder / "default__a.csv", _custom("custom:my_kernels:good", "my_kernels:good",
                                                  "bbbbbbbbbb", 2.0))
    append_row(folder / "default__b.csv", _custom("custom:my_kernels:fast", "my_kernels:fast",
                                                  "cccccccccc", 3.0))
    append_row(folder / "default__c.csv", replace(BASE, kernel="custom", seqlen=512,
                                                  kernel_version="old_pkg.attn:fn 0.1"))
    report.main(["--results", str(tmp_path / "runs" / "cpu"), "--out", str(tmp_path / "t")])
    assert "warning" not in capsys.readouterr().out
    md = (tmp_path / "t" / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert ("| seqlen | custom:examples.custom_kernel.my_attn:my_attention | "
            "custom:my_kernels:good | custom:my_kernels:fast | custom:old_pkg.attn:fn |") in md
    assert "| 256 | 1 | 2 | 3 | not measured |" in md


def test_two_targets_under_one_label_are_named_in_a_warning(tmp_path, capsys):
    folder = tmp_path / "kernels"
    append_row(folder / "exp__a.csv", _custom("mine", "my_kernels:good", "bbbbbbbbbb", 2.0))
    append_row(folder / "exp__b.csv", _custom("mine", "my_kernels:fast", "cccccccccc", 3.0,
                                              time="2025-01-02T00:00:00+00:00"))
    report.main(["--results", str(folder), "--out", str(tmp_path / "t")])
    warning = ("column 'mine' holds the rows of 2 targets (my_kernels:fast, my_kernels:good); "
               "each cell shows the newest row; give each target its own kernel.<name>.label")
    assert f"warning: {warning}" in capsys.readouterr().out.splitlines()
    readme = (tmp_path / "t" / "README.md").read_text()
    assert f"Warning: {warning}" in readme and "| 256 | 3 |" in readme


def test_two_versions_of_one_target_keep_one_column_showing_the_newer(tmp_path):
    folder = tmp_path / "kernels"
    append_row(folder / "exp.csv", _custom("custom:k:f", "k:f", "old0000000", 1.0))
    append_row(folder / "exp.csv", _custom("custom:k:f", "k:f", "new0000000", 2.0,
                                           time="2025-01-02T00:00:00+00:00"))
    assert len(read_results(folder)) == 2
    report.write_tables(folder, tmp_path / "t")
    md = (tmp_path / "t" / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| seqlen | custom:k:f |" in md and "| 256 | 2 |" in md
