"""tests/_cli.py starts a CLI as `python -m` does, with its imports frozen out of the garbage
collector: the same Hydra job (its name, working dir, overrides) and the same error line and
exit status for a bad value. (That its sweeps measure is what the CLI tests check.)"""
import subprocess
import sys
from pathlib import Path

from _cli import python_m

ROOT = Path(__file__).resolve().parents[1]


def _both(module, *args):
    runs = [subprocess.run([*argv, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
            for argv in ([sys.executable, "-m", module], python_m(module))]
    return [(run.returncode, run.stdout, run.stderr) for run in runs]


def test_the_same_hydra_job_as_under_python_m(tmp_path):
    plain, frozen = _both("bench.kernels", "kernel=[naive]", "seqlens=[64]",
                          f"hydra.run.dir={tmp_path}", "--cfg", "hydra")
    assert plain[0] == 0 and "name: __main__" in plain[1], plain
    assert frozen == plain


def test_the_same_error_line_and_status_as_under_python_m():
    plain, frozen = _both("bench.kernels", "seqlens=[0]")
    assert plain == (2, "", "error: seqlens must be positive ints, got [0]\n")
    assert frozen == plain
