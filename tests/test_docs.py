"""The documentation's links and cited files exist: every relative link in the Markdown pages a
user reads resolves to a file (and its #anchor to a heading of that page), and every repository
path a page cites in backticks is in the tree or, for the design pages' evidence that left the
tree, at a commit the page names for it ("at <sha>", "at commit <sha>")."""
import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("tools/**/*.md"),
                *ROOT.glob("examples/**/*.md"), *ROOT.glob("slurm/**/*.md")])
# a backticked word is a cited path when it starts with one of these folders
TOP = ("bench", "magi_attention", "configs", "scripts", "tools", "tests", "examples", "slurm",
       "docs", "results", "plots", ".ci")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"`([^`\s]+)`")
COMMIT = re.compile(r"\bat (?:commit )?`?([0-9a-f]{7,40})\b")


def _prose(page: Path) -> str:
    """A page without its fenced code blocks (whose `# ...` lines are comments, not headings)."""
    return re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _anchor(heading: str) -> str:
    """GitHub's id of a heading: a link's text only, lower case, punctuation dropped, each space
    a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache  # a page is linked to many times (docs/results.md ~100)
def _anchors(page: Path) -> set[str]:
    """The ids of a page's headings; GitHub numbers repeats: x, x-1, x-2."""
    ids, seen = set(), {}
    for m in re.finditer(r"^#+ (.+)$", _prose(page), re.M):
        slug = _anchor(m.group(1))
        n = seen.get(slug, 0)
        ids.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return ids


def _expand(path: str) -> list[str]:
    """`a_{x,y}.csv` -> a_x.csv, a_y.csv."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",")
            for p in _expand(path[:m.start()] + alt + path[m.end():])]


def _cited(text: str):
    """The repository paths a page cites in backticks (patterns and placeholders left out)."""
    for m in CITED.finditer(text):
        word = m.group(1).split("::")[0].rstrip(".,;")
        if word.split("/")[0] not in TOP or "/" not in word:
            continue
        if re.search(r"[<>*$|]|\.\.", word):  # a pattern, not a file
            continue
        yield from _expand(re.sub(r":\w[\w.]*$", "", word))  # module:function -> module


def test_the_pages_are_found():
    names = {_rel(p) for p in PAGES}
    assert {"README.md", "docs/results.md", "docs/architecture.md", "tools/README.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {_rel(dest)}")
    assert not broken, f"{_rel(page)}: " + "; ".join(broken)


@functools.cache  # two design pages name the same commit
def _paths_at(commit: str) -> set[str]:
    """The files and folders of ``commit``."""
    proc = subprocess.run(["git", "ls-tree", "-r", "-t", "--name-only", commit], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"commit {commit}, which the docs cite, is not in this clone's history")
    return set(proc.stdout.split())


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_cited_path_is_in_the_tree_or_at_a_commit_the_page_names(page):
    text = page.read_text()
    gone = sorted({path for path in _cited(text) if not (ROOT / path).exists()})
    commits = sorted(set(COMMIT.findall(text)))
    if gone and commits:
        known = set().union(*(_paths_at(c) for c in commits))
        gone = [p for p in gone if p.rstrip("/") not in known]
    assert not gone, (f"{_rel(page)} cites files in neither the tree nor a commit it names "
                      f"({', '.join(commits) or 'none'}): {gone}")
