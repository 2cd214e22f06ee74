"""docs/results.md and the README headline: generated from results/, current in the tree, ties
named, a mixed experiment listed but not tabulated."""
from dataclasses import replace

from bench import results_page
from bench.published import RunInfo
from bench.results import append_row, read_results



def test_the_committed_page_and_headline_are_what_the_results_give(capsys):
    """What CI checks: `python -m bench.report docs --check` (a change to results/ or to the
    measured code must come with the regenerated page)."""
    assert results_page.main(["--check"]) == 0, capsys.readouterr().out


def test_ratio_text_names_ties_within_three_percent():
    assert results_page.ratio_text(1.02) == "tie (1.02x)"
    assert results_page.ratio_text(0.97) == "tie (0.97x)"
    assert results_page.ratio_text(0.96) == "0.96x"
    assert results_page.ratio_text(1.5) == "1.50x"
    assert results_page.ratio_text(float("nan")) == "-"


def _info(path, commits, stale=()):
    return RunInfo(path, "kernels", "cpu", path.stem, commits, "2026-01-01T00:00:00",
                   "2026-01-01T00:00:00", stale)


def test_kernel_tables_hold_values_and_ratios_to_the_peers(tmp_path, result_row):
    rows = [replace(result_row, kernel="ffa", tflops_per_s=600.0),
            replace(result_row, kernel="fa4", tflops_per_s=610.0),
            replace(result_row, kernel="flex", tflops_per_s=400.0),
            replace(result_row, kernel="fa3", status="unsupported", tflops_per_s=None,
                    message="no mask")]
    path = tmp_path / "x.csv"
    for row in rows:
        append_row(path, row)
    frame = read_results([path])
    text = "\n".join(results_page._experiment_section(_info(path, (("abc1234", 4),)), frame))
    assert "| 64 | 600 | 610 | 400 | X (unsupported) |" in text
    # ffa / fa4 = 0.98 (a tie), ffa / flex = 1.50
    assert ("| 64 | tie (0.98x) / 1.50x | tie (1.00x) / 1.52x | 0.66x / tie (1.00x) | - / - |"
            in text)
    assert "State: **current**" in text


def test_ratios_only_to_a_peer_that_ran(tmp_path, result_row):
    """fa4 could not run this mask: the ratios are to flex alone; where neither peer ran, one
    line says so in place of a table of dashes."""
    rows = [replace(result_row, kernel="ffa", tflops_per_s=600.0),
            replace(result_row, kernel="fa4", status="unsupported", tflops_per_s=None,
                    message="no mask"),
            replace(result_row, kernel="flex", tflops_per_s=400.0),
            replace(result_row, kernel="ffa", direction="bwd", tflops_per_s=300.0),
            replace(result_row, kernel="flex", direction="bwd", status="unsupported",
                    tflops_per_s=None, message="no bwd")]
    path = tmp_path / "x.csv"
    for row in rows:
        append_row(path, row)
    text = "\n".join(results_page._experiment_section(_info(path, (("abc1234", 5),)),
                                                      read_results([path])))
    fwd, bwd = text.split(" fwd")[1], text.split(" fwd")[0]
    assert "Ratio to flex\n" in fwd and "| 64 | 1.50x | - | tie (1.00x) |" in fwd
    assert "Ratio to" not in bwd and "No ratios: flex ran at no seqlen here." in bwd


def test_a_mixed_experiment_is_listed_with_its_commits_not_tabulated(tmp_path, result_row):
    path = tmp_path / "mixed.csv"
    append_row(path, result_row)
    append_row(path, replace(result_row, seqlen=128, git_sha="def5678"))
    frame = read_results([path])
    text = "\n".join(results_page._experiment_section(
        _info(path, (("def5678", 1), ("abc1234", 1)), None), frame))
    assert "**Not one run**" in text and "`def5678` (1 rows); `abc1234` (1 rows)" in text
    assert "TFLOPs/s" not in text
    assert ("python -m bench.kernels experiment=mixed hardware=cpu out_dir=results/cpu "
            "report=false") in text


def test_cp_tables_give_magi_against_the_best_baseline(tmp_path, result_row):
    path = tmp_path / "cp.csv"
    cp = replace(result_row, cp_size=2, seqlen=128, kernel_version="bench.cp.x local=triton")
    for kernel, value in (("magi", 110.0), ("ulysses", 100.0), ("ring_p2p", 80.0),
                          ("magi_timed", 130.0), ("single_gpu", 200.0)):
        append_row(path, replace(cp, kernel=kernel, tflops_per_s=value))
    frame = read_results([path])
    info = replace(_info(path, (("abc1234", 5),)), kind="cp")
    text = "\n".join(results_page._experiment_section(info, frame))
    assert "#### causal fwd, 64 tokens/GPU, local triton" in text
    assert "1.10x vs ulysses" in text  # magi's variants and single_gpu are no baselines


def test_the_headline_skips_a_run_still_missing_cells_of_its_recipe(tmp_path, result_row,
                                                                    monkeypatch):
    """A one-run file that stopped early (here: no bwd row) leaves the README on the next
    headline experiment whose recipe is whole."""
    (tmp_path / "configs" / "experiment").mkdir(parents=True)
    (tmp_path / "configs" / "experiment" / "tiny.yaml").write_text(
        "defaults:\n  - override /kernel: [ffa, fa4, flex]\n  - override /mask: [causal]\n"
        "seqlens: [64]\n")
    monkeypatch.setattr(results_page, "HEADLINES", (("gpu_a", "tiny", 64), ("gpu_b", "tiny", 64)))
    values = {"ffa": 600.0, "fa4": 610.0, "flex": 400.0}
    for hardware, directions in (("gpu_a", ("fwd",)), ("gpu_b", ("fwd", "bwd"))):
        path = tmp_path / "results" / hardware / "kernels" / "tiny.csv"
        for kernel, value in values.items():
            for direction in directions:
                append_row(path, replace(result_row, hardware=hardware, kernel=kernel,
                                         direction=direction, tflops_per_s=value))
    text = results_page.headline(tmp_path)
    assert text.startswith("GPU_B,"), text
    (tmp_path / "results" / "gpu_b" / "kernels" / "tiny.csv").unlink()
    assert results_page.headline(tmp_path).startswith("No headline experiment is one whole run")


def test_the_page_of_another_checkout_reads_that_checkouts_recipes(tmp_path, result_row):
    """render(root) lists the cells missing from root's own recipe (here the backward of three
    kernels), not from the recipe of the checkout running it, and links files relative to root."""
    (tmp_path / "configs" / "experiment").mkdir(parents=True)
    (tmp_path / "configs" / "experiment" / "tiny.yaml").write_text(
        "defaults:\n  - override /kernel: [ffa, fa4, flex]\n  - override /mask: [causal]\n"
        "seqlens: [64]\n")
    path = tmp_path / "results" / "cpu" / "kernels" / "tiny.csv"
    for kernel in ("ffa", "fa4", "flex"):
        append_row(path, replace(result_row, kernel=kernel, tflops_per_s=100.0))
    text = results_page.render(tmp_path)
    assert "Not measured: 3 cells of the recipe (`configs/experiment/tiny.yaml`)" in text, text
    assert "File: [`results/cpu/kernels/tiny.csv`](../results/cpu/kernels/tiny.csv)" in text
