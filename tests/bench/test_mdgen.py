"""bench.mdgen: generated spans in hand-written Markdown (the README's headline table)."""
import pytest

from bench.mdgen import render, span_names

SECTIONS = {"n": lambda: "42", "table": lambda: "| a |\n|---|\n| 1 |"}


def test_inline_and_block_spans_are_filled_and_prose_kept():
    text = "x is <!-- gen:n -->old<!-- /gen -->.\n\n<!-- gen:table -->\nstale\n<!-- /gen -->\nend\n"
    assert span_names(text) == ["n", "table"]
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
