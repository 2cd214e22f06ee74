"""The README's MagiAttention example: it is quoted from examples/magi_cp/train_step.py, which
runs under torchrun (2 gloo processes) and matches single-device dense attention in out, dq, dk,
dv (the script asserts it and prints "ok")."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "magi_cp" / "train_step.py"


def test_readme_quotes_the_example():
    body = SCRIPT.read_text().split("# --8<-- [start:readme]\n")[1].split("# --8<-- [end:readme]")[0]
    block = textwrap.dedent(body).strip()
    assert block in (ROOT / "README.md").read_text()


def test_example_matches_single_device_attention():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "examples.magi_cp.train_step"]
    res = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    assert res.stdout.strip().endswith("ok") and "dk rel_err" in res.stdout
