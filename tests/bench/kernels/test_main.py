"""``python -m bench.kernels`` from a terminal: a bad value is one ``error:`` line before any
cell, Ctrl-C is one line with the rows written and how to resume, and the resume is exact."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[3]


def _run(tmp_path, *overrides, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "bench.kernels", *overrides, f"out_dir={tmp_path}/out",
         "progress=false", "report=false", f"hydra.run.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=timeout)


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
    assert ("warning: kernel.custom.target=no_such_pkg.attn:fn cannot be loaded here "
            "(ModuleNotFoundError: No module named 'no_such_pkg')") in result.stderr
    assert "{'missing': 2}" in result.stdout  # bench.status: a package that does not import


def test_ctrl_c_ends_with_one_line_and_the_rerun_resumes(tmp_path, ctrl_c_raises):
    overrides = ["kernel=[naive,sdpa_math]", "mask=[causal,full]", "seqlens=[64,128,256,512]",
                 "hardware.repeat=20", f"out_dir={tmp_path}/out", "progress=false",
                 "report=false", f"hydra.run.dir={tmp_path}/hydra"]
    proc = subprocess.Popen([sys.executable, "-m", "bench.kernels", *overrides], cwd=REPO,
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

    rerun = subprocess.run([sys.executable, "-m", "bench.kernels", *overrides], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"wrote {32 - written} rows" in rerun.stdout
    frame = pd.read_csv(path)
    assert len(frame) == 32 and not frame.duplicated(["kernel", "mask", "seqlen", "direction"]).any()
