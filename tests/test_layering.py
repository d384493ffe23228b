"""The layering stays one way (programs -> runtime -> model -> report -> CLI) and modules stay small:
the import graph of kda/ and npusim/, read from the source (every import, also inside functions, except
under `if TYPE_CHECKING:` and `if __name__ == "__main__":`), has no cycle, and npusim never imports kda."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kda", "npusim")
MAX_LINES = 420                     # "modules under ~400 lines"


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _skipped(node: ast.If) -> bool:
    t = ast.unparse(node.test)
    return "TYPE_CHECKING" in t or "__name__" in t


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _skipped(child):
                for c in child.orelse:
                    visit(c)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                mod = ".".join(base[:len(base) - child.level + 1] + ([child.module] if child.module else [])) \
                    if child.level else child.module
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in child.names)     # `from . import x` (a module)
            visit(child)
    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    graph = _graph()
    # package __init__ files re-export their modules: a module importing its own package is not a cycle
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    assert _cycles(graph) == []


def test_the_runtime_does_not_import_the_kda_layer():
    bad = {n: sorted(m for m in deps if m.startswith("kda")) for n, deps in _graph().items() if n.startswith("npusim")}
    assert {n: d for n, d in bad.items() if d} == {}


def test_modules_stay_small():
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
