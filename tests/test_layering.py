"""The layering stays one way and modules stay small. The import graph of kda/ and npusim/ is read from the
source: every import, also inside functions and under `if __name__ == "__main__":` guards (only
`if TYPE_CHECKING:` blocks are skipped). It has no cycle, npusim never imports kda, and no module imports a
folder ranked above its own (LAYERS: recording -> chip -> event model -> outputs -> the KDA library ->
a run's settings -> studies and the Python calls built on them (kda.simulate, which the package re-exports) -> views
-> command lines)."""
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kda", "npusim")
MAX_LINES = 400                     # "modules under ~400 lines"
MAX_FUNCTION_LINES = 80             # "functions short enough to read at once", from `def` to the last line
# The design programs read like the design document, a kernel's phases one after the other: their
# functions may run longer.
LONG_FUNCTIONS_ALLOWED = ("kda/programs/",)
MAX_MODULES = 13                    # "at most ~12 modules per folder" (__init__.py not counted)

# Each folder's rank: a module may import its own rank or lower, never higher. The package roots'
# command shims (kda/run.py, ...) and re-exporting __init__ files rank with the command lines.
LAYERS = {
    "npusim.errors": 0, "npusim.command": 0, "npusim.record": 1, "npusim.chip": 2, "npusim.model": 3, "npusim.output": 4,
    "npusim.fit": 4, "npusim": 5,
    "kda.programs": 10, "kda.reference": 10, "kda": 13, "kda.api": 13, "kda.driver": 11, "kda.decode": 11, "kda.kernels": 12, "kda.settings": 12, "kda.studies": 13, "kda.views": 14,
    "kda.cli": 15, "kda.sweep": 16,
}
ROOT_SHIMS = {"kda.run", "kda.validate", "kda.attribution", "kda.stability", "npusim.calibrate", "kda.decode.__main__"}


def _rank(module: str) -> int:
    if module in ROOT_SHIMS:
        return 99
    if module in ("kda", "npusim"):                   # the package re-exports
        return LAYERS[module]
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if (key := ".".join(parts[:n])) in LAYERS and (n > 1 or len(parts) == 1):
            return LAYERS[key]
        if n == 2 and ".".join(parts[:2]) not in LAYERS:     # a module at a package root
            return LAYERS[parts[0]]
    raise KeyError(module)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _skipped(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


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


def _test_imports(path: Path, seen: set[Path]) -> set[str]:
    """Every module a test file imports (also inside functions), and those of the test helpers it imports
    from tests/ in turn."""
    seen.add(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    for module in sorted(m for m in found if m.startswith("tests.")):
        helper = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        if helper.exists() and helper not in seen:
            found |= _test_imports(helper, seen)
    return found


def test_the_runtime_s_tests_do_not_import_the_kda_layer():
    """npusim is tested alone: tests/npusim (and the shared conftest.py) build their programs with npusim."""
    files = sorted((ROOT / "tests" / "npusim").rglob("*.py")) + [ROOT / "tests" / "conftest.py"]
    bad = {str(f.relative_to(ROOT)): sorted(m for m in _test_imports(f, set()) if m.split(".")[0] == "kda")
           for f in files}
    assert {f: m for f, m in bad.items() if m} == {}


def test_the_test_import_reader_follows_helpers(tmp_path, monkeypatch):
    helper = tmp_path / "tests" / "helper.py"
    helper.parent.mkdir()
    helper.write_text("def f():\n    import kda.programs\n")
    test = tmp_path / "tests" / "test_x.py"
    test.write_text("from npusim import simulate\nfrom tests.helper import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _test_imports(test, set()) >= {"npusim", "tests.helper", "kda.programs"}


def test_modules_stay_small():
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def _long_functions(path: Path) -> dict[str, int]:
    """Each function of the module (nested ones too, by their own lines) over MAX_FUNCTION_LINES: name -> lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: n for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES}


def test_the_function_measure_counts_from_def_to_the_last_line(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    src = tmp_path / "m.py"
    src.write_text(f"@decorator\ndef fits():\n{body}\n\n\ndef over():\n{body}\n    return x0\n")
    assert _long_functions(src) == {"over": MAX_FUNCTION_LINES + 1}


def test_functions_stay_short():
    long = {f"{rel}:{name}": n for p in _modules().values()
            if not (rel := p.relative_to(ROOT).as_posix()).startswith(LONG_FUNCTIONS_ALLOWED)
            for name, n in _long_functions(p).items()}
    assert long == {}


def test_no_module_imports_a_folder_above_its_own():
    back = sorted(f"{n} ({_rank(n)}) -> {m} ({_rank(m)})" for n, deps in _graph().items() for m in deps
                  if _rank(m) > _rank(n) and not n.startswith(m + "."))
    assert back == []


def test_the_rank_of_a_module_is_its_folder_s():
    assert _rank("npusim.model.engine") == 3 and _rank("npusim.errors") == 0 and _rank("npusim") == 5
    assert _rank("kda.driver.execute") == 11 and _rank("kda.cli.run") == 15 and _rank("kda.run") == 99
    assert _rank("kda.sweep.spec") == 16 and _rank("kda.programs.v3") == 10


def test_folders_stay_small():
    folders: dict[str, int] = {}
    for p in _modules().values():
        if p.name != "__init__.py":
            key = str(p.parent.relative_to(ROOT))
            folders[key] = folders.get(key, 0) + 1
    assert {k: n for k, n in folders.items() if n > MAX_MODULES} == {}
