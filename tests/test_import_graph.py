"""The import graph of magi_attention/, read from the source (ast: module-level and
function-level imports alike): no cycle between its modules, no import of the benchmark
(``bench``), and no import of another package's private module (``a/b/_c.py`` is imported only
from inside ``a/b/``). The library's tests import no ``bench`` either."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "magi_attention"


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imported_names(path: Path, root: Path = ROOT) -> set[str]:
    """Every module name ``path`` imports, anywhere in it, resolved to absolute names; for
    ``from x import y`` both ``x`` and ``x.y`` (y may be a submodule)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module_name(path, root)
    package = here if _is_package(path) else here.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _library() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the library modules it imports (a name that is not a module, e.g. a class
    imported from a package, counts as an import of that package)."""
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imported_names(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (an iterative depth-first search).
    A package's __init__ importing its own submodules is no cycle of interest: an edge from a
    module to a package it lies in is left out."""
    def inside(module, package):
        return module.startswith(package + ".")

    state: dict[str, int] = {}  # 1: on the path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            for nxt in stack[-1]:
                if inside(path[-1], nxt):
                    continue
                if state.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if not state.get(nxt):
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(sorted(graph[nxt])))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None


def _private_violations(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    """'importer -> a.b._c' for each import of a private module ``a.b._c`` from outside
    ``a.b``."""
    bad = []
    for name, path in modules.items():
        importer_package = name if _is_package(path) else name.rpartition(".")[0]
        for imported in sorted(_imported_names(path, root)):
            parts = imported.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    target = ".".join(parts[:i + 1])
                    if target in modules and not (importer_package == owner
                                                  or importer_package.startswith(owner + ".")):
                        bad.append(f"{name} -> {target}")
                    break
    return bad


def _imports_bench(path: Path) -> bool:
    return any(n == "bench" or n.startswith("bench.") for n in _imported_names(path))


def test_the_library_imports_have_no_cycle():
    cycle = _cycle(_edges(_library()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_library_never_imports_the_benchmark():
    offenders = [name for name, path in _library().items() if _imports_bench(path)]
    assert offenders == []


def test_no_module_imports_another_packages_private_module():
    assert _private_violations(_library()) == []


def test_the_library_tests_never_import_the_benchmark():
    offenders = [str(p.relative_to(ROOT))
                 for p in sorted((ROOT / "tests" / PACKAGE).rglob("*.py")) if _imports_bench(p)]
    assert offenders == []


def test_the_checks_catch_a_cycle_and_a_private_import():
    """The graph helpers on a made-up graph: a cycle through three modules is found, an edge
    into an enclosing package is not one."""
    graph = {"p": {"p.a"}, "p.a": {"p.b", "p"}, "p.b": {"p.c"}, "p.c": {"p.a"}}
    assert _cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    assert _cycle({"p": {"p.a"}, "p.a": {"p"}}) is None


@pytest.mark.parametrize("importer, imported, ok", [
    ("magi_attention.kernels.triton.forward", "magi_attention.kernels.triton._launch", True),
    ("magi_attention.kernels.triton.gluon.x", "magi_attention.kernels.triton._launch", True),
    ("magi_attention.comm.args", "magi_attention.kernels.triton._launch", False),
    ("magi_attention.kernels.plan", "magi_attention.kernels.triton._launch", False),
])
def test_a_private_module_is_imported_only_from_inside_its_package(importer, imported, ok,
                                                                   tmp_path):
    modules = {}
    for name in (importer, imported):
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        modules[name] = path
    modules[importer].write_text(f"import {imported}\n")
    modules[imported].write_text("")
    assert (_private_violations(modules, tmp_path) == []) == ok
