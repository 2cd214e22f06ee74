"""A results file a crash tore, or an empty or damaged one, never crashes a reader or a writer:
every whole row is kept, the torn text is set aside and named, the file stays appendable."""
import logging
from dataclasses import replace

import pandas as pd
import pytest

from bench.result_file import scan
from bench.results import COLUMNS, ResultRow, append_row, done_cells, read_results, repair_file

BASE = ResultRow(run_id="r", time="2025-01-01T00:00:00+00:00", git_sha="abc", hardware="cpu",
                 gpu_name="cpu", torch_version="2", kernel_version="v", kernel="naive",
                 mask="causal", seqlen=256, batch=1, num_heads_q=2, num_heads_kv=1, head_dim=16,
                 dtype="float32", direction="fwd", cp_size=1, mask_area=1.0, flops=1e9,
                 runtime_ms=1.0, tflops_per_s=1.0, peak_mem_gb=None, build_ms=None, status="ok",
                 message="", env="", spec="naive")
SEQLENS = (64, 128, 256, 512, 1024)


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "kernels"
    for seqlen in SEQLENS:
        append_row(folder / "job.csv", replace(BASE, seqlen=seqlen))
    return folder


def cut_last_row(path, keep_chars=30):
    """Truncate ``path`` in the middle of its last row, as a killed writer leaves it."""
    data = path.read_bytes()
    last_start = data.rstrip(b"\r\n").rfind(b"\n") + 1
    path.write_bytes(data[:last_start + keep_chars])
    return data[last_start:last_start + keep_chars].decode()


def test_reader_keeps_whole_rows_and_names_torn_line_and_empty_file(folder, caplog):
    torn = cut_last_row(folder / "job.csv")
    (folder / "empty.csv").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="bench.results"):
        frame = read_results(folder)
    assert sorted(frame.seqlen) == list(SEQLENS[:-1])
    assert "job.csv: skipped 1 torn line(s) (line 6:" in caplog.text and torn[:20] in caplog.text
    assert "empty.csv: empty (0 bytes); skipped" in caplog.text
    assert len(done_cells(folder)) == len(SEQLENS) - 1


def test_append_repairs_a_torn_tail_and_sets_the_text_aside(folder, caplog):
    path = folder / "job.csv"
    torn = cut_last_row(path)
    with caplog.at_level(logging.WARNING, logger="bench.results"):
        append_row(path, replace(BASE, seqlen=2048))
    frame = pd.read_csv(path)  # a plain parse works again: no glued line
    assert list(frame.columns) == list(COLUMNS)
    assert sorted(frame.seqlen) == [*SEQLENS[:-1], 2048]
    assert "kept 4 whole rows, dropped 1 torn line(s) (line 6:" in caplog.text
    assert (folder / "job.csv.dropped").read_text() == torn + "\n"
    assert not list(folder.glob("*.tmp"))


def test_nul_padding_after_a_full_disk_is_dropped(folder):
    path = folder / "job.csv"
    cut_last_row(path)
    with path.open("ab") as f:
        f.write(b"\x00" * 64)
    repair_file(path)
    assert sorted(pd.read_csv(path).seqlen) == list(SEQLENS[:-1])


def test_a_glued_line_in_the_middle_is_dropped_and_the_rest_kept(folder):
    """What older code left: a torn row, then the next run's row appended onto it."""
    path = folder / "job.csv"
    lines = path.read_text().splitlines(keepends=True)
    glued = lines[2].rstrip("\r\n")[:40] + lines[3]
    path.write_text("".join([*lines[:2], glued, *lines[4:]]))
    assert [n for n, _ in scan(path).torn] == [3]
    repair_file(path)
    assert sorted(pd.read_csv(path).seqlen) == [64, 512, 1024]


def test_a_file_cut_inside_its_header_is_set_aside(tmp_path, caplog):
    path = tmp_path / "job.csv"
    path.write_text(",".join(COLUMNS)[:50])
    with caplog.at_level(logging.WARNING, logger="bench.results"):
        assert read_results(tmp_path).empty
        append_row(path, BASE)
    assert "job.csv: header cut short; skipped" in caplog.text
    assert "set aside as" in caplog.text and (tmp_path / "job.csv.damaged").exists()
    assert len(pd.read_csv(path)) == 1


def test_older_file_without_the_spec_column_gets_it(tmp_path):
    path = tmp_path / "job.csv"
    old = list(COLUMNS[:COLUMNS.index("spec")])  # a file from before spec and the machine columns
    row = {**vars(BASE), "peak_mem_gb": "", "build_ms": ""}
    path.write_text(",".join(old) + "\r\n" + ",".join(str(row[c]) for c in old) + "\r\n")
    append_row(path, replace(BASE, seqlen=512))
    frame = pd.read_csv(path, keep_default_na=False)
    assert list(frame.columns) == list(COLUMNS)
    assert frame.spec.tolist() == ["", "naive"] and frame.seqlen.tolist() == [256, 512]


def test_messages_with_newlines_stay_on_one_line(tmp_path):
    path = tmp_path / "job.csv"
    append_row(path, replace(BASE, status="error", message="Traceback:\n  line 1\r\nboom"))
    assert len(path.read_text().splitlines()) == 2
    assert read_results(path).message.tolist() == ["Traceback:   line 1  boom"]


def test_tables_written_by_the_report_are_not_results_and_not_warned_about(tmp_path, caplog):
    (tmp_path / "table.csv").write_text("seqlen,naive\n256,1.5\n")
    with caplog.at_level(logging.WARNING, logger="bench.results"):
        assert read_results(tmp_path).empty
    assert caplog.text == ""


def test_ctrl_c_while_a_row_is_written_lands_after_it_is_counted(tmp_path, monkeypatch,
                                                                   ctrl_c_raises):
    """The race behind a flaky 'interrupted: wrote N rows' line: Ctrl-C between the file write
    and the in-memory count. record_row takes the interrupt after both."""
    import os
    import signal

    from bench import results
    written = []
    real_append = results.append_row

    def append_then_ctrl_c(path, row):
        real_append(path, row)
        os.kill(os.getpid(), signal.SIGINT)  # arrives before the row is counted
        written.append(row)

    monkeypatch.setattr(results, "append_row", append_then_ctrl_c)
    rows = []
    with pytest.raises(KeyboardInterrupt):
        results.record_row(tmp_path / "job.csv", BASE, rows)
    assert written == rows == [BASE]
    assert len(read_results(tmp_path / "job.csv")) == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
    monkeypatch.undo()
    results.record_row(tmp_path / "job.csv", replace(BASE, seqlen=64), rows)  # no interrupt
    assert len(rows) == 2 == len(read_results(tmp_path / "job.csv"))


def test_identifiers_that_look_like_numbers_read_back_as_written(tmp_path):
    """A commit or run id of decimal digits (with an "e") is text, not a number: its rows stay
    of that commit (the published page's state, the resume)."""
    path = tmp_path / "job.csv"
    ids = [("8917412022e3", "123456789012"), ("000000000123", "1e5")]
    for sha, run_id in ids:
        append_row(path, replace(BASE, git_sha=sha, run_id=run_id))
    frame = read_results(path)
    assert list(zip(frame.git_sha, frame.run_id)) == ids
