"""bench.provenance: rows name their commit and dirty state from git, or, on a copy of the tree
without .git, from the PROVENANCE.json written where git was."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import provenance
from bench.provenance import FILE_NAME, code_hash, current, from_git, record

ROOT = Path(__file__).resolve().parents[2]


def _git(root, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    """A tiny repository: one code file, one result file, one commit."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "a.py").write_text("x = 1\n")
    (root / "results").mkdir()
    (root / "results" / "r.csv").write_text("status\nok\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "one")
    return root


def _copy_without_git(root, dest):
    shutil.copytree(root, dest, ignore=shutil.ignore_patterns(".git"))
    return dest


def test_git_gives_commit_and_dirty_code_only(checkout):
    sha = _git(checkout, "rev-parse", "--short=12", "HEAD")
    assert from_git(checkout) == provenance.Provenance(sha, False, "git")
    (checkout / "results" / "r.csv").write_text("status\nok\nok\n")  # a sweep appending rows
    assert from_git(checkout).dirty is False
    (checkout / "bench" / "a.py").write_text("x = 2\n")
    assert from_git(checkout).dirty is True and current(checkout).label == f"{sha}-dirty"


def test_copy_without_git_reads_the_recorded_file(checkout, tmp_path):
    sha = _git(checkout, "rev-parse", "--short=12", "HEAD")
    assert record(checkout).label == sha
    assert json.loads((checkout / FILE_NAME).read_text())["git_sha"] == sha
    copy = _copy_without_git(checkout, tmp_path / "copy")
    assert from_git(copy) is None
    assert current(copy) == provenance.Provenance(sha, False, FILE_NAME)
    assert record(copy).label == sha  # without git the carried file is kept
    (copy / "results" / "r.csv").write_text("changed\n")
    assert current(copy).label == sha
    (copy / "bench" / "a.py").write_text("x = 3\n")  # code edited after the record
    assert current(copy).label == f"{sha}-dirty"


def test_copy_without_git_or_file_is_unknown_and_says_so(checkout, tmp_path, caplog):
    copy = _copy_without_git(checkout, tmp_path / "copy")
    assert current(copy).label == "unknown" and current(copy).dirty is None
    assert "scripts/provenance.sh" in caplog.text


def test_result_rows_on_a_copy_without_git(tmp_path):
    """run_meta() in a copy of this repository's code without .git gives the recorded commit."""
    copy = tmp_path / "copy"
    for top in provenance.CODE_PATHS:
        src = ROOT / top
        if src.is_dir():
            shutil.copytree(src, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy(src, copy / top)
    payload = {"git_sha": "0123456789ab", "dirty": False, "code_hash": code_hash(copy)}
    (copy / FILE_NAME).write_text(json.dumps(payload))
    out = subprocess.run([sys.executable, "-c", "from bench.results import run_meta; "
                          "import bench; print(bench.__file__); print(run_meta().git_sha)"],
                         cwd=copy, env=dict(os.environ, PYTHONPATH=str(copy)), check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [str(copy / "bench" / "__init__.py"), "0123456789ab"]


def _stale_copy(checkout, tmp_path, *edited_after_record: str):
    """A copy whose .git stays at the checkout's commit while the checkout commits once more and
    records it, then edits ``edited_after_record`` (files under bench/, untracked); the copy
    gets the checkout's code and record. Returns (copy, old sha, new sha)."""
    old = _git(checkout, "rev-parse", "--short=12", "HEAD")
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)                     # .git at the old commit
    (checkout / "bench" / "a.py").write_text("x = 5\n")
    _git(checkout, "commit", "-qam", "two")
    new = _git(checkout, "rev-parse", "--short=12", "HEAD")
    record(checkout)
    for name in edited_after_record:
        (checkout / "bench" / name).write_text("y = 1\n")
    for name in ("a.py", *edited_after_record):
        shutil.copy(checkout / "bench" / name, copy / "bench" / name)
    shutil.copy(checkout / FILE_NAME, copy / FILE_NAME)
    assert old != new
    return copy, old, new


def test_copy_with_a_stale_git_trusts_the_recorded_file(checkout, tmp_path):
    """The device machines' copies carry the .git of an older commit: the file recorded for
    exactly this code wins over that HEAD."""
    copy, _, new = _stale_copy(checkout, tmp_path)
    assert current(copy).label == new


def test_copy_with_a_stale_git_and_an_edit_names_the_recorded_commit_dirty(checkout, tmp_path):
    """A script edited after the record makes the code hash differ; the stale .git's older HEAD
    must not be taken: the recorded commit (marked dirty) is the truth."""
    copy, _, new = _stale_copy(checkout, tmp_path, "b.py")
    assert current(copy).label == f"{new}-dirty"
    # in the checkout itself git knows the recorded commit and still decides
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-qm", "three")
    assert current(checkout).label == _git(checkout, "rev-parse", "--short=12", "HEAD")


# ---------------------------------------------------------------- committed rows and the backfill
_COMMIT_ID = r"^[0-9a-f]{7,12}(-dirty|-inferred)?$"


def test_every_committed_row_names_a_commit():
    """No committed result row says 'unknown': new rows carry the recorded commit, rows measured
    before provenance existed carry the inferred one, marked "-inferred"."""
    import pandas as pd
    files = sorted((ROOT / "results").rglob("*.csv"))
    checked = 0
    for path in files:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if "git_sha" not in frame:
            continue
        bad = frame.git_sha[~frame.git_sha.str.match(_COMMIT_ID)]
        assert bad.empty, f"{path.relative_to(ROOT)}: git_sha {sorted(set(bad))[:3]}"
        checked += len(frame)
    assert checked > 1000  # the check read the result files, not nothing
