"""Published results: one run per figure (mixed commits refused), stale marks from git, the
figure footer, and the machine columns."""
import shutil
import subprocess
from dataclasses import replace

import pytest

from bench import machine, published, regenerate
from bench.results import append_row, read_results



def _write(path, rows):
    for row in rows:
        append_row(path, row)
    return path


def test_one_run_is_required_and_a_mix_is_named(tmp_path, result_row):
    row = result_row
    one = read_results([_write(tmp_path / "a.csv", [row, replace(row, seqlen=128)])])
    assert published.require_one_run(one) == "abc1234"
    mixed = read_results([_write(tmp_path / "b.csv", [
        row, replace(row, seqlen=128, git_sha="def5678", time="2026-01-02T00:00:00+00:00")])])
    with pytest.raises(published.MixedRuns, match=r"rows of 2 commits \(def5678 \(1 rows\), "
                                                  r"abc1234 \(1 rows\)\)"):
        published.require_one_run(mixed, "b.csv")
    # runs of one time: in the order of their commits
    tied = read_results([_write(tmp_path / "c.csv", [
        replace(row, git_sha="fff0000"), replace(row, seqlen=128, git_sha="aaa0000")])])
    with pytest.raises(published.MixedRuns, match=r"\(aaa0000 \(1 rows\), fff0000 \(1 rows\)\)"):
        published.require_one_run(tied, "c.csv")


def _git(root, *args):
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository with one measured-code file and one report file, one commit."""
    root = tmp_path / "repo"
    (root / "bench" / "kernels").mkdir(parents=True)
    (root / "bench" / "kernels" / "naive.py").write_text("x = 1\n")
    (root / "bench" / "report.py").write_text("y = 1\n")
    _git(root, "init", "-q")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    return root, _git(root, "rev-parse", "--short=12", "HEAD")


def test_stale_when_measured_code_changes_not_when_the_report_does(repo):
    root, sha = repo
    assert published.stale_files(sha, "kernels", root) == ()
    (root / "bench" / "report.py").write_text("y = 2\n")  # not measured code
    published._git.cache_clear()
    assert published.stale_files(sha, "kernels", root) == ()
    (root / "bench" / "kernels" / "naive.py").write_text("x = 2\n")
    published._git.cache_clear()
    assert published.stale_files(sha, "kernels", root) == ("bench/kernels/naive.py",)
    assert published.stale_files(f"{sha}-dirty", "kernels", root) == ("bench/kernels/naive.py",)
    assert published.stale_files("0123456789ab", "kernels", root) is None  # unknown commit


def test_predictions_are_stale_when_the_rows_they_read_or_the_predictor_change(repo):
    root, sha = repo
    kernels = root / "results" / "h100" / "kernels" / "kernel_masks.csv"
    predictor = root / "bench" / "cp" / "predict" / "rates.py"
    page = root / "bench" / "cp" / "predict" / "report.py"
    for path in (kernels, predictor, page, root / "results" / "h100" / "cp_predicted" / "v.csv"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a\n")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "two")
    sha = _git(root, "rev-parse", "--short=12", "HEAD")
    published._git.cache_clear()
    assert published.stale_files(sha, "cp_predicted", root) == ()
    (root / "results" / "h100" / "cp_predicted" / "v.csv").write_text("b\n")  # its own output
    page.write_text("b\n")  # the page that shows it
    published._git.cache_clear()
    assert published.stale_files(sha, "cp_predicted", root) == ()
    kernels.write_text("b\n")  # a rate-table input re-measured
    published._git.cache_clear()
    assert published.stale_files(sha, "cp_predicted", root) == (
        "results/h100/kernels/kernel_masks.csv",)
    # ... the input of h100 and h100x2 predictions, not of h200's
    assert published.stale_files(sha, "cp_predicted", root, "h100x2") == (
        "results/h100/kernels/kernel_masks.csv",)
    assert published.stale_files(sha, "cp_predicted", root, "h200x2") == ()
    assert published.stale_files(sha, "kernels", root) == ()  # measured rows: not stale
    predictor.write_text("b\n")
    published._git.cache_clear()
    assert published.stale_files(sha, "cp_predicted", root) == (
        "bench/cp/predict/rates.py", "results/h100/kernels/kernel_masks.csv")


def test_run_info_states_and_footer(repo, result_row):
    root, sha = repo
    path = _write(root / "results" / "cpu" / "kernels" / "default.csv",
                  [replace(result_row, git_sha=sha)])
    published._git.cache_clear()
    info = published.run_info(path, "kernels", root=root)
    assert (info.state, info.commit, info.date) == ("current", sha, "2026-01-01")
    assert info.label(root) == f"results/cpu/kernels/default.csv | commit {sha} | 2026-01-01"
    (root / "bench" / "kernels" / "naive.py").write_text("x = 3\n")
    published._git.cache_clear()
    info = published.run_info(path, "kernels", root=root)
    assert info.state == "stale"
    assert "STALE: bench/kernels/naive.py changed since" in info.label(root)
    inferred = published.run_info(path, "kernels", read_results([path]).assign(
        git_sha=f"{sha}-inferred"), root)
    assert inferred.state == "inferred"


def test_regenerate_draws_one_run_and_refuses_a_mix(repo, tmp_path, result_row):
    root, sha = repo
    one = root / "results" / "cpu" / "kernels" / "one.csv"
    _write(one, [replace(result_row, git_sha=sha),
                 replace(result_row, git_sha=sha, direction="bwd")])
    mixed = root / "results" / "cpu" / "kernels" / "mixed.csv"
    # the commits are listed newest first: the older run's rows come second
    older = replace(result_row, git_sha="fedcba987654", seqlen=128,
                    time="2025-01-01T00:00:00+00:00")
    _write(mixed, [replace(result_row, git_sha=sha), older])
    stale_figure = root / "plots" / "cpu" / "kernels" / "mixed" / "causal" / "fwd" / "x.png"
    stale_figure.parent.mkdir(parents=True)
    stale_figure.write_bytes(b"old")
    written, refused = regenerate.draw_published(root)
    drawn = {p.relative_to(root).as_posix() for p in written}
    assert "plots/cpu/kernels/one/causal/fwd/flops_report.png" in drawn
    assert not any("/mixed/" in p for p in drawn)
    assert not stale_figure.exists()  # a refused file leaves no figure behind
    assert refused == [f"not drawn: results/cpu/kernels/mixed.csv: rows of 2 commits "
                       f"({sha} (1 rows), fedcba987654 (1 rows)); a figure or table is drawn "
                       f"from one run: measure the experiment again into an empty file"]


def test_machine_columns_are_pairs_and_name_torch():
    assert machine.parse_pairs("a=1;b=x=y;;c") == {"a": "1", "b": "x=y"}
    versions = machine.parse_pairs(machine.versions())
    assert versions["torch"] == __import__("torch").__version__
    assert "triton" in versions or shutil.which("nvidia-smi") is None
    if not __import__("torch").cuda.is_available():
        assert machine.gpu_clocks() == ""


def test_a_row_records_the_machine(tmp_path, result_row):
    from bench.results import run_meta
    meta = run_meta()
    assert meta.versions == machine.versions() and "torch=" in meta.versions
    path = _write(tmp_path / "m.csv", [replace(result_row, versions=meta.versions)])
    assert read_results([path])["versions"].iloc[0] == meta.versions
