"""Text that can't drift: each package folder's map of its modules (its __init__.py docstring, rendered into
docs/reference/layout.md) names every module and subfolder that is there and no module that is not; and every
path into kda/ or npusim/ that the code, the tests, the benchmarks and the docs name exists."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kda", "npusim")
MODULE = re.compile(r"(?<![\w/.])([a-z_][a-z0-9_]*)\.py\b")
# a path into this repository's packages (one of another repository's, fla/ops/kda/..., has a folder before it)
REPO_PATH = re.compile(r"(?<![\w/.-])((?:kda|npusim)/[\w/.-]*\w\.(?:py|toml|csv|json|md))")
TEXT_FOLDERS = ("kda", "npusim", "tests", "benchmarks", "scripts", "notebooks", "docs")
NOT_OURS = ("docs/sources",)              # copies of outside documents, shipped as they are

def _folders() -> list[Path]:
    return sorted(init.parent for package in PACKAGES for init in (ROOT / package).rglob("__init__.py"))


def test_every_folder_map_names_its_modules():
    wrong = []
    for folder in _folders():
        rel = folder.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
        named = set(MODULE.findall(doc))
        modules = {p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__")}
        subfolders = {p.parent.name for p in folder.glob("*/__init__.py")}
        where = folder.relative_to(ROOT)
        wrong += [f"{where}/__init__.py does not name {m}.py" for m in sorted(modules - named)]
        wrong += [f"{where}/__init__.py names {m}.py, which is not there" for m in sorted(named - modules)]
        wrong += [f"{where}/__init__.py does not name {s}/" for s in sorted(subfolders)
                  if not re.search(rf"(?<![\w/]){s}/", doc)]
    assert not wrong, "\n".join(wrong)


def _text_files():
    for top in TEXT_FOLDERS:
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix in (".py", ".md", ".toml", ".ipynb") and not rel.startswith(NOT_OURS) \
                    and "/results/" not in rel and "__pycache__" not in rel:
                yield path
    yield ROOT / "README.md"
    yield ROOT / "pyproject.toml"


def test_named_paths_exist():
    stale = []
    for path in _text_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{n}: {p}" for p in REPO_PATH.findall(line)
                      if not (ROOT / p).exists()]
    assert not stale, "paths that moved or went away:\n" + "\n".join(stale)
