"""Give result rows measured before provenance was recorded (``git_sha`` = 'unknown': the GPU
copy of the repository had no .git) the commit they were most likely measured at, marked as such.

The rule: the newest commit of this repository whose commit time is at or before the run's
first row. The device ran the working tree of that moment, which may have held uncommitted
changes, so the value is ``<sha>-inferred``, never a bare sha. Only 'unknown' fields change, and
each file is rewritten field for field (every other byte as it was).

    python scripts/backfill_provenance.py [results]     # rewrites files in place, lists them
"""
from __future__ import annotations

import argparse
import csv
import io
import subprocess
from datetime import datetime
from pathlib import Path

from bench.provenance import UNKNOWN

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = "-inferred"


def commit_at(when: datetime, root: Path = ROOT) -> str:
    """The 12-digit sha of the newest commit made at or before ``when``."""
    out = subprocess.run(["git", "log", "-1", "--format=%H", f"--before={when.isoformat()}"],
                         capture_output=True, text=True, cwd=root, check=True).stdout.strip()
    if not out:
        raise LookupError(f"no commit at or before {when.isoformat()}")
    return out[:12]


def backfill_text(text: str, sha_for) -> tuple[str, int, str]:
    """``text`` (a results CSV) with every 'unknown' git_sha set from ``sha_for(first time)``;
    returns the new text, how many rows changed and the label they got."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or "git_sha" not in rows[0] or "time" not in rows[0]:
        return text, 0, ""
    sha_col, time_col = rows[0].index("git_sha"), rows[0].index("time")
    unknown = [r for r in rows[1:] if len(r) > sha_col and r[sha_col] == UNKNOWN]
    if not unknown:
        return text, 0, ""
    first = min(datetime.fromisoformat(r[time_col]) for r in unknown)
    label = sha_for(first) + SUFFIX
    for r in unknown:
        r[sha_col] = label
    out = io.StringIO()
    # the writer's line ending is the file's own (the bench writes \r\n, the csv default)
    csv.writer(out, lineterminator="\r\n" if "\r\n" in text else "\n").writerows(rows)
    return out.getvalue(), len(unknown), label


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "results")
    args = parser.parse_args(argv)
    for path in sorted(args.folder.rglob("*.csv")):
        with open(path, newline="") as f:  # keep \r\n: a plain read turns it into \n
            text = f.read()
        new, n, label = backfill_text(text, commit_at)
        if n:
            with open(path, "w", newline="") as f:
                f.write(new)
            print(f"{path.relative_to(ROOT)}: {n} rows -> {label}")


if __name__ == "__main__":
    main()
