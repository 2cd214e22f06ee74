"""RESULTS.md quotes only numbers its spans compute from the committed result files
(bench.results_md on bench.mdgen), so a number cannot drift from its file."""
import re

import pytest

from bench import results_md
from bench.mdgen import SPAN, render, span_names

# Decimals RESULTS.md may hold outside generated spans: software versions and the goals of
# issues 3 and 4, which are targets, not measurements. A measured value typed by hand fails.
HAND_WRITTEN_DECIMALS = {"2.11", "3.6", "4.0.0b36", "0.8", "0.7", "0.95"}


def test_committed_results_md_is_current():
    text = results_md.RESULTS_MD.read_text()
    assert results_md.stale_spans(text) == []
    assert render(text, results_md.SECTIONS) == text


def test_every_section_is_used_and_no_measured_decimal_is_typed_by_hand():
    text = results_md.RESULTS_MD.read_text()
    assert set(span_names(text)) == set(results_md.SECTIONS)
    outside = SPAN.sub("", text)
    decimals = set(re.findall(r"\d+(?:\.\d+)+(?:b\d+)?", outside))
    assert decimals <= HAND_WRITTEN_DECIMALS, decimals - HAND_WRITTEN_DECIMALS


def test_a_drifted_number_is_named(tmp_path):
    text = results_md.RESULTS_MD.read_text()
    drifted = text.replace("<!-- gen:h200.ffa_vs_cudnn_fwd -->0.76-0.81<!-- /gen -->",
                           "<!-- gen:h200.ffa_vs_cudnn_fwd -->0.78-0.81<!-- /gen -->")
    assert drifted != text
    assert results_md.stale_spans(drifted) == ["h200.ffa_vs_cudnn_fwd"]
    (tmp_path / "RESULTS.md").write_text(drifted)
    with pytest.raises(SystemExit, match="ffa_vs_cudnn_fwd"):
        results_md.main([str(tmp_path / "RESULTS.md"), "--check"])
    results_md.main([str(tmp_path / "RESULTS.md")])
    assert (tmp_path / "RESULTS.md").read_text() == text


# -- the span engine -----------------------------------------------------------------------------
SECTIONS = {"n": lambda: "42", "table": lambda: "| a |\n|---|\n| 1 |"}


def test_inline_and_block_spans_are_filled_and_prose_kept():
    text = "x is <!-- gen:n -->old<!-- /gen -->.\n\n<!-- gen:table -->\nstale\n<!-- /gen -->\nend\n"
    assert render(text, SECTIONS) == ("x is <!-- gen:n -->42<!-- /gen -->.\n\n<!-- gen:table -->\n"
                                      "| a |\n|---|\n| 1 |\n<!-- /gen -->\nend\n")


@pytest.mark.parametrize("text, match", [
    ("<!-- gen:nope --><!-- /gen -->", "without a section"),
    ("<!-- gen:n -->1", "openings"),
    ("<!-- gen:table --><!-- /gen -->", "inline"),
], ids=["unknown-name", "unclosed", "lines-in-inline-span"])
def test_malformed_spans_raise(text, match):
    with pytest.raises(ValueError, match=match):
        render(text, SECTIONS)
