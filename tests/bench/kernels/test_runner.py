"""The sweep records failures as rows and goes on; a rerun skips done cells (the same measured
function), re-measures a torn or changed one; force re-measures."""
import logging
import re
import sys
from dataclasses import replace

import pandas as pd
import pytest

from bench.config import KernelChoice
from bench.kernels.runner import run_job, run_sweep
from bench.report import write_tables
from bench.results import read_results

pytestmark = pytest.mark.slow  # started first under xdist (tests/conftest.py)

FAULTY = KernelChoice("testing_faulty", "testing_faulty",
                      {"error_cells": ("causal:128",), "oom_cells": ("full:128",)})


def test_sweep_with_injected_error_and_oom_finishes_and_rerun_skips(tiny_config):
    config = tiny_config(kernels=("naive", FAULTY, "fa4"), masks=("full", "causal"))
    rows = run_sweep(config)
    frame = read_results(config.out_file)
    assert len(rows) == len(frame) == 2 * 3 * 2  # masks x kernels x directions
    status = {(r.kernel, r.mask, r.direction): (r.status, r.message) for r in rows}
    assert status["testing_faulty", "causal", "fwd"][0] == "error"
    assert "injected failure" in status["testing_faulty", "causal", "bwd"][1]
    assert status["testing_faulty", "full", "fwd"][0] == "oom"
    assert "injected OOM" in status["testing_faulty", "full", "fwd"][1]
    # the faulty kernel's bwd on the OOM cell ran after the fwd failed: it is recorded too
    assert status["testing_faulty", "full", "bwd"][0] == "oom"
    assert {status["fa4", m, d][0] for m in ("full", "causal") for d in ("fwd", "bwd")} == {"unsupported"}
    ok = frame[frame.status == "ok"]
    assert set(ok.kernel) == {"naive"} and (ok.runtime_ms > 0).all() and (ok.tflops_per_s > 0).all()
    assert ok.message.str.contains("gate: ").all()

    rerun = run_sweep(config)
    # only the error cells are measured again; ok, oom and unsupported cells are final
    assert {(r.kernel, r.mask) for r in rerun} == {("testing_faulty", "causal")}
    assert {r.status for r in rerun} == {"error"}

    forced = run_sweep(replace(config, force=True, kernels=config.kernels[:1]))
    assert len(forced) == 4 and {r.status for r in forced} == {"ok"}


def test_rows_carry_the_exact_mask_flops(tiny_config):
    config = tiny_config(masks=("causal",), directions=("fwd",))
    (row,) = run_sweep(config)
    s = 128
    assert row.mask_area == s * (s + 1) / 2
    assert row.flops == 4 * row.mask_area * 2 * 16  # 4 * area * heads_q * head_dim
    assert abs(row.tflops_per_s - row.flops / (row.runtime_ms * 1e-3) / 1e12) < 1e-12


@pytest.mark.parametrize("seqlen", [128, 256], ids=["all_rows", "sampled_rows"])
def test_right_forward_wrong_backward_gets_no_bwd_time(tiny_config, seqlen):
    """The gate checks gradients at every seqlen (the config samples rows above 128)."""
    wrong_bwd = KernelChoice("wrong_bwd", "testing_faulty",
                             {"wrong_grad_cells": (f"causal_document:{seqlen}",)})
    config = tiny_config(kernels=("naive", wrong_bwd), masks=("causal_document",),
                         seqlens=(seqlen,))
    status = {(r.kernel, r.direction): r for r in run_sweep(config)}
    assert status["wrong_bwd", "fwd"].status == "ok" and status["wrong_bwd", "fwd"].runtime_ms > 0
    bwd = status["wrong_bwd", "bwd"]
    assert bwd.status == "wrong" and bwd.runtime_ms is None
    assert bwd.message.startswith("gate: dv rel_err"), bwd.message
    rows = "32 rows" if seqlen > 128 else f"{seqlen} rows"
    assert status["naive", "bwd"].status == "ok" and rows in status["naive", "bwd"].message


def test_wrong_kernel_is_recorded_wrong_not_timed(tiny_config, monkeypatch):
    import bench.gate as gate
    monkeypatch.setitem(gate.REL_TOL, "float32", -1.0)  # nothing can pass
    config = tiny_config(masks=("causal",))
    rows = run_sweep(config)
    assert [r.status for r in rows] == ["wrong", "wrong"]
    assert all(r.runtime_ms is None for r in rows)


def test_report_after_sweep_writes_tables_and_plots(tiny_config, tmp_path):
    config = tiny_config(kernels=("naive", "sdpa_math"), masks=("causal",), seqlens=(64, 128),
                         report=True, plots_dir=tmp_path / "plots")
    run_sweep(config)
    tables = tmp_path / "results" / "tables" / "test"  # <out_dir>/tables/<job>
    assert config.tables_dir == tables
    assert (tables / "README.md").read_text().count("| 128 |") >= 2
    assert (tmp_path / "plots" / "causal" / "bwd" / "flops_report.png").stat().st_size > 5000
    csv = pd.read_csv(tables / "tflops_per_s_cpu_causal_fwd_1.csv", index_col=0)
    assert list(csv.columns) == ["naive", "sdpa_math"] and list(csv.index) == [64, 128]


def test_absent_package_is_missing_and_a_real_limit_unsupported(tiny_config, monkeypatch):
    """At supports time (a custom kernel whose module is absent) and at prepare time (an
    ImportError out of prepare) the row says missing; NotImplementedError stays unsupported."""
    from bench.kernels.naive import Naive

    absent = KernelChoice("absent", "custom", {"target": "no_such_peer_package.attn:fn"})
    rows = run_sweep(tiny_config(kernels=(absent,)))
    assert {r.status for r in rows} == {"missing"}
    assert "no_such_peer_package" in rows[0].message

    def prepare_raises(error):
        def prepare(self, *args):
            raise error
        return prepare

    monkeypatch.setattr(Naive, "prepare", prepare_raises(ModuleNotFoundError("No module named 'peer'")))
    rows = run_sweep(tiny_config(force=True))
    assert {r.status for r in rows} == {"missing"}
    monkeypatch.setattr(Naive, "prepare", prepare_raises(NotImplementedError("fp8 backward")))
    rows = run_sweep(tiny_config(force=True))
    assert {r.status for r in rows} == {"unsupported"}


def test_rerun_after_a_torn_row_and_an_empty_file_remeasures_only_the_torn_cell(tiny_config,
                                                                                caplog):
    config = tiny_config(masks=("full", "causal"), seqlens=(64, 128))
    assert len(run_sweep(config)) == 8
    path = config.out_file
    data = path.read_bytes()
    last_start = data.rstrip(b"\r\n").rfind(b"\n") + 1
    path.write_bytes(data[:last_start + 40])  # a writer killed in the middle of the last row
    (path.parent / "other_job.csv").write_bytes(b"")  # and a job that died before its header
    with caplog.at_level(logging.WARNING, logger="bench.results"):
        rerun = run_sweep(config)
    assert [(r.mask, r.seqlen, r.direction) for r in rerun] == [("causal", 128, "bwd")]
    frame = pd.read_csv(path)  # every whole row kept, the torn one measured again
    assert len(frame) == 8 and frame.status.eq("ok").all()
    assert len(frame.groupby(["mask", "seqlen", "direction"])) == 8
    assert "test.csv: kept 7 whole rows, dropped 1 torn line(s) (line 9:" in caplog.text
    assert "other_job.csv: empty (0 bytes); skipped" in caplog.text
    assert (path.parent / "test.csv.dropped").read_bytes() == data[last_start:last_start + 40] + b"\n"


WRONG_KERNEL = '''from examples.custom_kernel.my_attn import my_attention
def attn(q, k, v, mask):
    return my_attention(q, k, v, mask) * 2
'''
FIXED_KERNEL = '''from examples.custom_kernel.my_attn import my_attention
def attn(q, k, v, mask):
    return my_attention(q, k, v, mask)
'''


def test_a_changed_custom_target_or_corrected_kernel_is_measured(tiny_config, tmp_path,
                                                                   monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def custom(target):
        return KernelChoice("custom", "custom", {"target": target})

    config = tiny_config(kernels=(custom("examples.custom_kernel.my_attn:my_attention"),))
    assert [r.status for r in run_sweep(config)] == ["ok", "ok"]
    assert run_sweep(config) == []  # same target, same code: done

    typo = replace(config, kernels=(custom("user_atn:attn"),))
    assert [r.status for r in run_sweep(typo)] == ["missing", "missing"]  # not importable
    (tmp_path / "user_attn.py").write_text(WRONG_KERNEL)
    user = replace(config, kernels=(custom("user_attn:attn"),))
    rows = run_sweep(user)  # the corrected target is measured, not skipped as "custom" done
    assert [r.status for r in rows] == ["wrong", "wrong"]
    assert rows[0].spec.startswith("custom[target=user_attn:attn@sha1:")

    (tmp_path / "user_attn.py").write_text(FIXED_KERNEL)  # fixed in place: same target
    monkeypatch.delitem(sys.modules, "user_attn")
    rows = run_sweep(user)
    assert [r.status for r in rows] == ["ok", "ok"]
    assert run_sweep(user) == []
    write_tables(config.out_file, tmp_path / "tables")
    table = (tmp_path / "tables" / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| 128 | " in table and "wrong" not in table  # the newest row wins the table



def test_a_backward_the_kernel_cannot_run_keeps_the_forward_row(tiny_config, monkeypatch):
    """FlexAttention on CPU has no backward: the gate's backward raises NotImplementedError.
    The forward is still gated and timed; only the backward row says unsupported."""
    from bench.kernels.naive import Naive

    real_prepare = Naive.prepare

    def prepare(self, *args):
        prepared = real_prepare(self, *args)

        def bwd():
            raise NotImplementedError("no backward on this device")
        prepared.bwd = bwd
        return prepared

    monkeypatch.setattr(Naive, "prepare", prepare)
    rows = run_sweep(tiny_config(force=True))
    assert {r.direction: r.status for r in rows} == {"fwd": "ok", "bwd": "unsupported"}
    assert "no backward" in next(r.message for r in rows if r.direction == "bwd")


@pytest.mark.parametrize("seqlen,restricted", [(128, False), (256, True)],
                         ids=["gate_on_every_row", "gate_on_sampled_rows"])
def test_the_backward_is_gated_on_its_rows_and_timed_on_the_whole_dout(tiny_config, monkeypatch,
                                                                      seqlen, restricted):
    """Above the gate's full_max_seqlen its dout is zero off a few rows, so dq is too. The
    timed calls must see the whole dout (its values change a GPU's clocks): dq then has no
    zero row. At or below it, the gate's dout is already whole and is kept."""
    from bench.kernels.naive import Naive

    real_prepare = Naive.prepare
    zero_rows: list[int] = []  # per backward call: rows of dq that are all zero

    def prepare(self, *args):
        prepared = real_prepare(self, *args)
        real_bwd = prepared.bwd

        def bwd():
            real_bwd()
            dq = prepared.grads_bshd()[0][0]
            zero_rows.append(int((dq.flatten(1) == 0).all(dim=1).sum()))
        prepared.bwd = bwd
        return prepared

    monkeypatch.setattr(Naive, "prepare", prepare)
    config = tiny_config(masks=("full",), seqlens=(seqlen,), directions=("bwd",))
    (row,) = run_sweep(config)
    assert row.status == "ok", row.message
    gate_call, timed = zero_rows[0], zero_rows[1:]
    assert len(timed) == config.hardware.warmup + config.hardware.repeat
    assert (gate_call > 0) == restricted  # the gate's rows only: the others' dq is zero
    assert timed == [0] * len(timed)


def test_a_job_reports_the_cells_it_skipped_from_the_file_that_measured_them(tiny_config,
                                                                            tmp_path, monkeypatch):
    """Job B asks for sdpa_math at 64 and 128; job A's file already holds 64. B measures only
    128, and its tables and figures still draw sdpa_math at 64 from A's file, named."""
    import bench.plot as plot

    job_a = tiny_config(kernels=("naive", "sdpa_math"), seqlens=(64,))
    run_sweep(job_a)
    from_a = read_results(job_a.out_file)
    job_b = replace(tiny_config(kernels=("sdpa_math",), seqlens=(64, 128), report=True,
                                plots_dir=tmp_path / "plots"),
                    out_file=job_a.out_file.with_name("b.csv"))
    drawn = {}
    monkeypatch.setattr(plot, "write_figure", lambda rows, path, note, **kw: drawn.setdefault(
        (path.parent.name, path.name), (rows, note)))
    result = run_job(job_b)
    assert [(r.seqlen, r.direction) for r in result.rows] == [(128, "fwd"), (128, "bwd")]
    assert result.skipped == 2
    assert set(result.report.sources) == {job_a.out_file, job_b.out_file}

    a_fwd = from_a[(from_a.kernel == "sdpa_math") & (from_a.direction == "fwd")].iloc[0]
    table = (job_b.tables_dir / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert f"| 64 | {a_fwd.tflops_per_s:.4g} |" in table
    assert f"- {job_a.out_file}: sdpa_math (seqlen 64)" in table
    assert f"- {job_b.out_file}: sdpa_math (seqlen 128)" in table
    rows, note = drawn["fwd", "flops_report.png"]
    assert sorted(rows[rows.status == "ok"].seqlen) == [64, 128]
    assert f"rows from {job_a.out_file}: sdpa_math (seqlen 64)" in note
    assert ("fwd", "mem_report.png") not in drawn  # the CPU records no peak memory


def test_a_cell_asked_for_and_measured_nowhere_shows_not_measured(tiny_config):
    from bench.kernels.runner import KernelRunner, write_job_report

    config = tiny_config(kernels=("naive", "sdpa_math"), seqlens=(64,), report=True)
    runner = KernelRunner(config)
    runner.run()
    lost = {k: c for k, c in runner.asked.items() if c["kernel"] == "sdpa_math"}
    kept = read_results(config.out_file)
    kept[kept.kernel == "naive"].to_csv(config.out_file, index=False)  # sdpa_math's rows gone
    write_job_report(config, {**runner.asked, **lost})
    table = (config.tables_dir / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| seqlen | naive | sdpa_math |" in table
    assert re.search(r"\| 64 \| [\d.e-]+ \| not measured \|", table), table


def test_a_row_that_cannot_be_written_stops_the_sweep_not_blames_the_kernel(tiny_config,
                                                                            monkeypatch):
    """A full disk mid-run: RowsNotWritten, and no row of the kernel says error."""
    import bench.results as results

    real_append, calls = results._append, []

    def append(path, row):
        calls.append(row)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        real_append(path, row)

    monkeypatch.setattr(results, "_append", append)
    config = tiny_config(kernels=("naive",), seqlens=(64,))
    with pytest.raises(results.RowsNotWritten, match="No space left on device"):
        run_sweep(config)
    assert [r.status for r in read_results(config.out_file).itertuples()] == ["ok"]
    assert [r.status for r in calls] == ["ok", "ok"]  # the bwd row it tried, not an error row


def test_two_versions_of_a_target_are_two_rows_and_the_table_shows_the_newer(tiny_config,
                                                                           tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / "user_v.py").write_text(WRONG_KERNEL)
    user = KernelChoice("custom", "custom", {"target": "user_v:attn"})
    config = tiny_config(kernels=(user,), directions=("fwd",))
    assert [r.status for r in run_sweep(config)] == ["wrong"]
    (tmp_path / "user_v.py").write_text(FIXED_KERNEL)
    monkeypatch.delitem(sys.modules, "user_v")
    assert [r.status for r in run_sweep(config)] == ["ok"]
    frame = read_results(config.out_file)
    assert list(frame.kernel) == ["custom:user_v:attn"] * 2 and frame.spec.nunique() == 2
    write_tables(config.out_file, tmp_path / "tables")
    table = (tmp_path / "tables" / "tflops_per_s_cpu_causal_fwd_1.md").read_text()
    assert "| seqlen | custom:user_v:attn |" in table and "wrong" not in table
