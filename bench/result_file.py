"""One results CSV on disk: which of its lines are whole rows, and repairing a file a crash tore.

Writers (``bench.results.append_row``) put one row on one line (no field holds a newline) and
fsync it, so a crash (a killed writer, a full disk) can only leave the last line cut short. A
file that older code appended to after such a crash may also hold a glued line in the middle.
A data line is a whole row when it ends with a newline and parses to exactly as many fields as
the header; any other line is torn.

- :func:`scan` reads a file and sorts its lines; it changes nothing (readers use it).
- :func:`repair` rewrites a file with its whole rows only, through a temporary file and a
  rename, so the repair itself cannot tear; the dropped text goes to ``<file>.dropped`` and a
  warning names it. A file without a usable header is moved to ``<file>.damaged``. Older files
  whose header lacks newer columns get them, empty.

Neither suffix ends in ``.csv``, so readers that collect ``*.csv`` never see the set-aside text.
"""
from __future__ import annotations

import csv
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

__all__ = ["Scan", "scan", "repair", "describe_torn", "DROPPED_SUFFIX", "DAMAGED_SUFFIX"]

log = logging.getLogger("bench.results")

# A header without these columns is not a results file (e.g. a table written by bench.report).
REQUIRED_COLUMNS = ("run_id", "kernel", "direction", "status")
DROPPED_SUFFIX = ".dropped"
DAMAGED_SUFFIX = ".damaged"
EMPTY = "empty (0 bytes)"


@dataclass
class Scan:
    """What :func:`scan` found. ``header`` is None when the file has no results header; then
    ``reason`` says why and ``damaged`` tells a torn or garbled results file (its first line
    starts like ours, or it is empty) from some other CSV."""

    path: Path
    header: list[str] | None
    header_line: str = ""
    lines: list[str] = field(default_factory=list)            # whole data lines, no newline
    torn: list[tuple[int, str]] = field(default_factory=list)  # (1-based line number, text)
    reason: str = ""
    damaged: bool = False


def _fields(line: str) -> list[str] | None:
    try:
        return next(csv.reader([line]), [])
    except csv.Error:
        return None


def scan(path: str | os.PathLike) -> Scan:
    """Sort the lines of the CSV at ``path`` into the header, whole rows and torn lines."""
    path = Path(path)
    data = path.read_bytes()
    if not data:
        return Scan(path, None, reason=EMPTY, damaged=True)
    text = data.decode("utf-8", errors="replace")
    ends_whole = text.endswith("\n")
    lines = text.split("\n")
    if ends_whole:
        lines.pop()  # the empty string after the last newline
    header_line = lines[0].rstrip("\r")
    header = _fields(header_line) if "\x00" not in header_line else None
    ours = header_line.startswith(REQUIRED_COLUMNS[0])
    if ours and len(lines) == 1 and not ends_whole:
        return Scan(path, None, reason="header cut short", damaged=True)
    if header is None or not set(REQUIRED_COLUMNS) <= set(header):
        return Scan(path, None, reason="no results header (first line: "
                    f"{header_line[:60]!r})", damaged=ours)
    result = Scan(path, header, header_line)
    last = len(lines) - 1
    for index, raw in enumerate(lines[1:], start=1):
        line = raw.rstrip("\r")
        if not line.strip("\x00 "):
            if line:  # NUL padding (a full disk): not a row, but worth naming
                result.torn.append((index + 1, line))
            continue
        whole = (index < last or ends_whole) and "\x00" not in line
        fields = _fields(line) if whole else None
        if fields is not None and len(fields) == len(header):
            result.lines.append(line)
        else:
            result.torn.append((index + 1, line))
    return result


def describe_torn(torn: Sequence[tuple[int, str]], limit: int = 3) -> str:
    """``line 181: '...,bwd,1'`` for the first ``limit`` torn lines (text shortened)."""
    shown = []
    for number, text in torn[:limit]:
        text = text.replace("\x00", "")
        text = text if len(text) <= 60 else text[:25] + "..." + text[-30:]
        shown.append(f"line {number}: {text!r}")
    more = f" and {len(torn) - limit} more" if len(torn) > limit else ""
    return "; ".join(shown) + more


def _free_name(path: Path, suffix: str) -> Path:
    candidate, n = path.with_name(path.name + suffix), 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}{suffix}{n}")
    return candidate


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def repair(path: str | os.PathLike, columns: Sequence[str]) -> list[str] | None:
    """Make ``path`` safe to append to; the caller holds the file's lock.

    Returns:
        The header to append rows under (the file's, with any of ``columns`` it lacked added at
        the end), or None when there is no file left to append to (none, empty, or set aside):
        the caller starts it with a header.
    """
    path = Path(path)
    if not path.exists():
        return None
    found = scan(path)
    if found.header is None:
        if found.reason == EMPTY:
            return None
        aside = _free_name(path, DAMAGED_SUFFIX)
        os.replace(path, aside)
        log.warning("%s: %s; set aside as %s, a new file is started", path, found.reason, aside)
        return None
    missing = [c for c in columns if c not in found.header]
    if not found.torn and not missing:
        return found.header
    header = found.header + missing
    pad = "," * len(missing)  # the added columns are the last ones: empty in older rows
    body = "".join(line + pad + "\r\n" for line in found.lines)
    _replace(path, ",".join(header) + "\r\n" + body)
    if missing:
        log.info("%s: added the column(s) %s, empty in its %d older rows", path, missing,
                 len(found.lines))
    if found.torn:
        dropped = path.with_name(path.name + DROPPED_SUFFIX)
        with dropped.open("a", newline="") as f:
            f.write("".join(text + "\n" for _, text in found.torn))
        log.warning("%s: kept %d whole rows, dropped %d torn line(s) (%s); their text is in %s, "
                    "and their cells are measured again", path, len(found.lines),
                    len(found.torn), describe_torn(found.torn), dropped)
    return header
