"""``python -m bench.kernels`` from a terminal: a bad value is one ``error:`` line before any
cell (and no row already written is lost), Ctrl-C is one line with the rows written and how to
resume, the resume is exact, and every path the last lines print exists."""
import os
import re
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from _cli import python_m

from bench.config import job_key
from bench.results import ResultRow, append_row, read_results

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

REPO = Path(__file__).resolve().parents[3]
EARLIER = ResultRow(run_id="earlier", time="2025-01-01T00:00:00+00:00", git_sha="abc",
                    hardware="cpu", gpu_name="cpu", torch_version="2", kernel_version="v",
                    kernel="naive", mask="causal", seqlen=4096, batch=1, num_heads_q=4,
                    num_heads_kv=2, head_dim=64, dtype="float32", direction="fwd", cp_size=1,
                    mask_area=1.0, flops=1e9, runtime_ms=1.0, tflops_per_s=1.0, peak_mem_gb=None,
                    build_ms=None, status="ok", message="", env="", spec="naive")


def _run(tmp_path, *overrides, timeout=300, report=False, env=None):
    return subprocess.run(
        [*python_m("bench.kernels"), *overrides, f"out_dir={tmp_path}/out",
         "progress=false", f"report={str(report).lower()}", f"hydra.run.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def _earlier_rows(folder: Path, *names: str) -> dict[Path, bytes]:
    """Files of rows measured before (cells no test command asks for), and their bytes."""
    files = {}
    for name in names:
        append_row(folder / name, EARLIER)
        append_row(folder / name, replace(EARLIER, direction="bwd"))
        files[folder / name] = (folder / name).read_bytes()
    return files


@pytest.mark.parametrize("overrides, message", [
    (["seqlens=[128,0]"], "error: seqlens must be positive ints, got [128, 0]"),
    (["kernel=custom", "kernel.custom.target=my_attn"],
     "error: kernel.custom.target must be 'pkg.module:function', got 'my_attn'"),
    (["experiment=kernel_masks"], "error: no CUDA here, so hardware=auto picked the cpu preset, "
                                  "but experiment=kernel_masks reaches seqlen 65536"),
], ids=["seqlen_0", "target_without_colon", "gpu_experiment_on_cpu"])
def test_bad_value_is_one_error_line_before_any_cell(tmp_path, overrides, message):
    result = _run(tmp_path, *overrides)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(message) and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_unimportable_target_is_named_on_the_terminal(tmp_path):
    result = _run(tmp_path, "kernel=custom", "kernel.custom.target=no_such_pkg.attn:fn",
                  "mask=causal", "seqlens=[64]")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.strip() == (
        "warning: custom kernel target no_such_pkg.attn:fn cannot be imported (No module named "
        "'no_such_pkg'); its cells are recorded missing; check the module name and that its "
        "folder is on PYTHONPATH")
    assert "{'missing': 2}" in result.stdout  # bench.status: a package that does not import
    assert "tables:" not in result.stdout  # report=false: no path to tables it did not write


@pytest.mark.parametrize("kernels, message", [
    ("[naive,sdpa_mth]", "error: unknown kernel 'sdpa_mth' in kernel=[naive,sdpa_mth]; known "
                         "kernels: cudnn, cudnn_sdpa, cudnn_te, custom, "),
    ("naive,sdpa_mth", "error: unknown kernel 'sdpa_mth' in kernel=naive,sdpa_mth; known "
                       "kernels: cudnn, "),
], ids=["list", "multirun"])
def test_unknown_kernel_is_one_line_listing_the_known_ones(tmp_path, kernels, message):
    earlier = _earlier_rows(tmp_path / "out" / "kernels", "default.csv")
    sweep = ["-m", f"hydra.sweep.dir={tmp_path}/sweep"] if "[" not in kernels else []
    result = _run(tmp_path, *sweep, f"kernel={kernels}", "mask=causal", "seqlens=[64]")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(message) and " sdpa_math " in line.replace(",", " ")
    assert {p: p.read_bytes() for p in earlier} == earlier
    assert list((tmp_path / "out" / "kernels").iterdir()) == list(earlier)


USER_KERNELS = """from examples.custom_kernel.my_attn import my_attention


def good(q, k, v, mask):
    return my_attention(q, k, v, mask)
"""


def test_misspelt_target_function_is_an_error_row_with_one_line(tmp_path):
    """The module imports but has no such function: error rows (not missing, which says a
    package is absent), one log line naming the functions it has, earlier rows kept."""
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "my_kernels.py").write_text(USER_KERNELS)
    overrides = ["kernel=[naive,custom]", "kernel.custom.target=my_kernels:goood", "mask=causal",
                 "seqlens=[64,128]"]
    folder = tmp_path / "out" / "kernels"
    earlier = _earlier_rows(folder, "default.csv", f"{job_key('default', overrides)}.csv")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "user"), str(REPO)])}
    result = _run(tmp_path, *overrides, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    # Hydra's log handler writes to stdout; the error is logged once, not once per cell
    (line,) = [x for x in (result.stdout + result.stderr).splitlines() if "'goood'" in x]
    assert line.endswith("kernel custom:my_kernels:goood on causal S=64 failed: AttributeError: "
                         "custom kernel target 'my_kernels:goood': module 'my_kernels' has no "
                         "'goood'; did you mean my_kernels:good? its functions: good")
    rows = read_results(folder)
    custom = rows[rows.kernel == "custom:my_kernels:goood"]
    assert len(custom) == 4 and set(custom.status) == {"error"}
    assert custom.message.str.contains("did you mean my_kernels:good?").all()
    assert set(rows[rows.kernel == "naive"].status) == {"ok"}
    for path, data in earlier.items():  # every earlier row still there, first in its file
        assert path.read_bytes().startswith(data)


@pytest.mark.parametrize("out_dir, blocked", [
    ("/proc/bench_runs", "/proc/bench_runs/kernels (No such file or directory)"),
    ("{tmp}/out", "{tmp}/out/tables/"),
], ids=["proc", "tables_is_a_file"])
def test_unwritable_out_dir_is_one_line_before_any_cell(tmp_path, out_dir, blocked):
    out_dir = out_dir.format(tmp=tmp_path)
    earlier = _earlier_rows(tmp_path / "out" / "kernels", "default.csv")
    (tmp_path / "out" / "tables").write_text("a file where the tables folder would go")
    result = subprocess.run(
        [*python_m("bench.kernels"), "kernel=[naive,ffa]", "mask=causal",
         "seqlens=[64]", f"out_dir={out_dir}", "progress=false", f"hydra.run.dir={tmp_path}/h"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: out_dir: cannot write {blocked.format(tmp=tmp_path)}")
    assert line.endswith("choose a folder you can write, e.g. out_dir=$HOME/bench_runs")
    assert {p: p.read_bytes() for p in earlier} == earlier
    assert list((tmp_path / "out" / "kernels").iterdir()) == list(earlier)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_read_only_out_dir_is_one_line_before_any_cell(tmp_path):
    earlier = _earlier_rows(tmp_path / "out" / "kernels", "default.csv")
    (tmp_path / "out" / "kernels").chmod(0o555)
    try:
        result = _run(tmp_path, "kernel=naive", "mask=causal", "seqlens=[64]")
    finally:
        (tmp_path / "out" / "kernels").chmod(0o755)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: out_dir: cannot write {tmp_path}/out/kernels (Permission denied)")
    assert {p: p.read_bytes() for p in earlier} == earlier


def test_a_job_whose_cells_were_all_measured_elsewhere_still_reports_them(tmp_path):
    """The README's situation: the default run measured every cell, so a later command asking
    for some of them writes no row; its tables and figures are still written, from the file
    that holds the rows, and every path the last lines print exists."""
    first = _run(tmp_path, "kernel=[naive,sdpa_math]", "mask=causal", "seqlens=[64,128]")
    assert first.returncode == 0, first.stderr[-2000:]
    again = _run(tmp_path, "kernel=[sdpa_math]", "mask=causal", "seqlens=[128]", report=True)
    assert again.returncode == 0, again.stderr[-2000:]
    lines = again.stdout.strip().splitlines()
    assert lines[0] == ("wrote 0 rows; 2 cells already measured were read, not run again "
                        "(force=true measures them again)")
    (measured,) = (tmp_path / "out" / "kernels").glob("*.csv")
    tables = tmp_path / "out" / "tables" / "default__kernel=_sdpa_math___mask=causal__seqlens=_128_"
    assert lines[1] == f"tables: {tables}/README.md (rows from {measured})"
    plots = tmp_path / "out" / "plots" / tables.name
    assert lines[2] == f"figures: {plots}/ (2 files)"
    assert len(lines) == 3 and not any(p.name == "mem_report.png" for p in plots.rglob("*"))
    printed = re.findall(r"(/\S+?)[,)]?(?:\s|$)", again.stdout)
    assert printed and all(Path(p.rstrip("/")).exists() for p in printed), printed
    table = (tables / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert re.search(r"\| 128 \| \d", table) and f"- {measured}: sdpa_math (seqlen 128)" in table


def test_ctrl_c_ends_with_one_line_and_the_rerun_resumes(tmp_path, ctrl_c_raises):
    overrides = ["kernel=[naive,sdpa_math]", "mask=[causal,full]", "seqlens=[64,128,256,512]",
                 "hardware.repeat=20", f"out_dir={tmp_path}/out", "progress=false",
                 "report=false", f"hydra.run.dir={tmp_path}/hydra"]
    proc = subprocess.Popen([*python_m("bench.kernels"), *overrides], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_raises)
    out_file = tmp_path / "out" / "kernels"
    deadline = time.monotonic() + 240
    while not list(out_file.glob("*.csv")) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    (path,) = out_file.glob("*.csv")
    written = len(pd.read_csv(path))
    assert proc.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted: wrote {written} rows to {path}; run the same command again to resume "
        "(done cells are skipped)")
    assert "Traceback" not in stderr
    assert 0 < written < 32

    rerun = subprocess.run([*python_m("bench.kernels"), *overrides], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"wrote {32 - written} rows" in rerun.stdout
    frame = pd.read_csv(path)
    assert len(frame) == 32 and not frame.duplicated(["kernel", "mask", "seqlen", "direction"]).any()
