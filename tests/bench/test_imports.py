"""bench/'s import graph, read from the source (every import statement, those inside functions
too): no circle between its modules, and a private module (``_name.py``) is imported only from
inside the package that holds it, in bench and in magi_attention alike."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bench", "magi_attention")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """The project modules ``path`` imports: ``from pkg import name`` counts ``pkg.name`` when
    that is a module (then ``pkg`` is only the folder it sits in), else ``pkg``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                     for a in node.names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] in PACKAGES and _is_module(n)}
    return found - {module}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted((ROOT / "bench").rglob("*.py"))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_real_imports():
    graph = _graph()
    assert "bench.gate" in graph["bench.kernels.runner"]
    assert "bench.sweep" in graph["bench.cp.runner"]
    assert "bench.problem" in graph["bench.kernels.base"]
    assert "bench.kernels._flash" in graph["bench.kernels.fa2"]  # a relative import
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_bench():
    assert _cycles(_graph()) == []


def test_private_modules_are_imported_only_inside_their_package():
    bad = []
    for importer, targets in _graph().items():
        for target in targets:
            parent, _, leaf = target.rpartition(".")
            if leaf.startswith("_") and not leaf.startswith("__") and \
                    not (importer == parent or importer.startswith(parent + ".")):
                bad.append(f"{importer} imports {target}")
    assert bad == []
