"""Which code made a result row: the commit, and whether the code differed from it (dirty).

In a git checkout, git says. A copy of the tree without ``.git`` (the GPU machines get one)
reads ``PROVENANCE.json`` instead, written in the checkout at install or launch time:

    python -m bench.provenance        # scripts/provenance.sh; scripts/install.sh runs it

The file is untracked but not ignored, so it travels with a copy of the working tree. It also
holds a hash of the code, so a copy whose code was edited after the file was written reads dirty,
not clean. Only code counts (``CODE_PATHS``): a sweep appending to a tracked result file does not
make its own rows dirty. Rows carry ``Provenance.label``: ``<sha>``, ``<sha>-dirty`` (the suffix
of ``git describe --dirty``) or ``unknown``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CODE_PATHS", "FILE_NAME", "Provenance", "code_hash", "current", "from_git",
           "git_output", "record", "main"]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
FILE_NAME = "PROVENANCE.json"
CODE_PATHS = ("bench", "magi_attention", "csrc", "configs", "scripts", "slurm", "pyproject.toml")
CODE_SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".sh", ".cu", ".cuh", ".cpp", ".h", ".csv"}
UNKNOWN = "unknown"
# a guard against a hung git, not a deadline: under four test workers on two cores a stale
# check came back unknown with 10 s
_GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class Provenance:
    """``git_sha``: the commit (12 hex digits) or 'unknown'; ``dirty``: the code differs from it
    (None: cannot tell); ``source``: where this came from ('git', the file's name, or 'none')."""

    git_sha: str
    dirty: bool | None
    source: str

    @property
    def label(self) -> str:
        return f"{self.git_sha}-dirty" if self.dirty and self.git_sha != UNKNOWN else self.git_sha


def git_output(root: Path, *args: str) -> str | None:
    """``git <args>``'s stdout in ``root``; None without git, on an error or a timeout."""
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=root,
                             timeout=_GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def from_git(root: Path = ROOT) -> Provenance | None:
    """The checkout's commit and whether its tracked code is modified; None without git or
    outside a checkout of this repository."""
    top = git_output(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != root.resolve():
        return None  # no git, or bench sits inside some other repository
    sha = git_output(root, "rev-parse", "--short=12", "HEAD")
    status = git_output(root, "status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    if sha is None or status is None:
        return None
    return Provenance(sha.strip(), bool(status.strip()), "git")


def code_hash(root: Path = ROOT) -> str:
    """sha256 over the relative path and bytes of every code file under ``CODE_PATHS``."""
    digest = hashlib.sha256()
    for top in CODE_PATHS:
        base = root / top
        files = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in files:
            if (path.is_file() and path.suffix in CODE_SUFFIXES
                    and "__pycache__" not in path.parts):
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def record(root: Path = ROOT) -> Provenance:
    """Write ``<root>/PROVENANCE.json`` from git and return what it holds. Without git (a copy
    of the tree) the file that came with the copy is kept as it is."""
    found = from_git(root)
    if found is None:
        return current(root)
    payload = {"git_sha": found.git_sha, "dirty": found.dirty, "code_hash": code_hash(root)}
    (root / FILE_NAME).write_text(json.dumps(payload, indent=1) + "\n")
    return found


def _from_file(root: Path) -> Provenance | None:
    path = root / FILE_NAME
    try:
        payload = json.loads(path.read_text())
        sha, dirty, recorded_hash = payload["git_sha"], payload["dirty"], payload["code_hash"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    edited = recorded_hash != code_hash(root)
    return Provenance(str(sha), bool(dirty) or edited, FILE_NAME)


def _knows(root: Path, sha: str) -> bool:
    """Whether the checkout's git has the commit ``sha`` (a stale copy's .git does not)."""
    return git_output(root, "cat-file", "-e", f"{sha}^{{commit}}") is not None


def current(root: Path = ROOT) -> Provenance:
    """The recorded file when the code is exactly what it recorded (a copied tree may carry a
    stale ``.git`` of an older commit: the device machines' copies do), else git when it knows
    the recorded commit (a checkout that moved on since the record), else the file (dirty: the
    code changed since; a stale .git's sha would misname the rows), else unknown (with
    a warning: rows will not name their code)."""
    recorded = _from_file(root)
    if recorded is not None and not recorded.dirty:
        return recorded
    git = from_git(root)
    if git is not None and recorded is not None and not _knows(root, recorded.git_sha):
        git = None  # this .git predates the recorded commit: it cannot name the code
    found = git or recorded
    if found is None:
        log.warning("no git checkout and no %s under %s: rows get git_sha=unknown; run "
                    "scripts/provenance.sh in the checkout before copying the tree",
                    FILE_NAME, root)
        return Provenance(UNKNOWN, None, "none")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record the commit and dirty flag in "
                                                 f"{FILE_NAME} (kept as is without git).")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root")
    found = record(parser.parse_args(argv).root)
    print(f"provenance: {found.label} (from {found.source})")


if __name__ == "__main__":
    main()
