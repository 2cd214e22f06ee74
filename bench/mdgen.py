"""Generated spans in a hand-written Markdown file, so that the numbers it quotes cannot drift
from the files they come from.

A span is opened and closed by HTML comments, which Markdown does not show:

    FFA forward is <!-- gen:ffa_vs_fa4_fwd -->0.70-0.73<!-- /gen --> of FA4.

    <!-- gen:kernel_table -->
    | mask | ... |
    <!-- /gen -->

:func:`render` replaces the text of every span with ``sections[name]()``, the prose around them
stays as written. A span on one line takes a one-line value; a block span keeps its content on
the lines between the comments. ``bench.results_page`` fills the README's headline span.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

__all__ = ["SPAN", "render", "span_names"]

SPAN = re.compile(r"<!-- gen:(?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /gen -->", re.DOTALL)
_OPEN = re.compile(r"<!-- gen:")
_CLOSE = re.compile(r"<!-- /gen -->")


def span_names(text: str) -> list[str]:
    """The names of the spans in ``text``, in order."""
    return [m["name"] for m in SPAN.finditer(text)]


def render(text: str, sections: Mapping[str, Callable[[], str]]) -> str:
    """``text`` with each span's body replaced by its section's output.

    Raises:
        ValueError: a span names no section, or an opening comment has no closing one.
    """
    if len(_OPEN.findall(text)) != len(_CLOSE.findall(text)):
        raise ValueError(f"{len(_OPEN.findall(text))} '<!-- gen:' openings but "
                         f"{len(_CLOSE.findall(text))} '<!-- /gen -->' closings")
    unknown = [n for n in span_names(text) if n not in sections]
    if unknown:
        raise ValueError(f"spans without a section: {unknown}; known: {sorted(sections)}")

    def body(match: re.Match) -> str:
        value = sections[match["name"]]().strip("\n")
        block = match["body"].startswith("\n")
        if not block and "\n" in value:
            raise ValueError(f"span {match['name']!r} is inline but its section gives lines")
        inner = f"\n{value}\n" if block else value
        return f"<!-- gen:{match['name']} -->{inner}<!-- /gen -->"

    return SPAN.sub(body, text)
