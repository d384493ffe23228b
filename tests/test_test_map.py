"""Every module of kda/ and npusim/ has a test that reaches it by its own path: a test imports it, or runs it
(`python -m kda.sweep`), or it is a registry's entry that its package's tests walk by name (a root shim that
hands `python -m` to kda/cli is tested through its command). The modules that
have none yet are listed in UNTESTED, a list that can only shrink: a module that gains a test leaves it, and a
new module comes with its test."""
import ast
from pathlib import Path

from tests.test_layering import ROOT_SHIMS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kda", "npusim")
REGISTRIES = {          # folders whose modules are entries of a registry the named tests walk by name
    "kda.programs": "tests/kda/test_designs.py (DESIGNS, every design's numerics and timing)",
    "kda.decode.kernels": "tests/decode/test_decode_timing.py (MEASURED, every measured decode kernel)",
    "kda.decode.programs": "tests/decode/test_decode_numerics.py (every decode design against fp64)",
    "kda.kernels": "tests/kda/test_kernels_*.py (kda.kernels.registry's measured kernels, by name)",
}
STRUCTURE = ("test_test_map.py", "test_layering.py")      # they name modules without testing them
UNTESTED: tuple[str, ...] = ()


def _modules() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name not in ("__init__.py", "__main__.py"):
                found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


def _reached(source: str) -> set[str]:
    """Module names a test's source imports (`from a.b import c` names a.b and a.b.c) or names as a string
    (`python -m a.b`, importlib)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def _untested() -> set[str]:
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.name not in STRUCTURE]
    reached = set().union(*(_reached(p.read_text(encoding="utf-8")) for p in tests))
    return {m for m in _modules() - ROOT_SHIMS if m not in reached and m.rpartition(".")[0] not in REGISTRIES}


def test_the_reader_sees_imports_and_module_strings():
    source = "import a.b\nfrom c.d import e\nrun(['python', '-m', 'f.g'])\nfrom . import h\n"
    assert _reached(source) >= {"a.b", "c.d", "c.d.e", "f.g"}
    assert "h" not in _reached(source)


def test_every_module_has_a_test_or_is_listed_untested():
    untested = _untested()
    new = sorted(untested - set(UNTESTED))
    assert not new, f"modules no test reaches by their own path (add a test): {', '.join(new)}"


def test_the_untested_list_only_shrinks():
    gained = sorted(set(UNTESTED) - _untested())
    assert not gained, f"these modules have a test now: take them out of UNTESTED: {', '.join(gained)}"
