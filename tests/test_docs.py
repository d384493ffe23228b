"""The docs site builds with warnings as errors (`make docs`), and every figure in README.md and docs/ is
what its command prints now (scripts/docs_figures.py; `make docs-figures` refreshes them)."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module                  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


figures = _load("docs_figures")
FIGURES = [f for path in figures.markdown_files() for f in figures.find(path)]


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "index.html").exists()
    assert _links_to_no_file(tmp_path) == []


def _links_to_no_file(site: Path) -> list[str]:
    """Every relative link of the built pages that, opened from file://, would not land on a file (a folder
    shows a directory listing). The 404 page is a web server's alone."""
    bad = []
    for page in site.rglob("*.html"):
        if page.name == "404.html":
            continue
        for href in re.findall(r'href="([^"#?]+)', page.read_text()):
            if "://" in href or href.startswith(("mailto:", "data:")):
                continue
            if not (page.parent / href).is_file():
                bad.append(f"{page.relative_to(site)} -> {href}")
    return bad


def test_links_in_the_readme_and_docs_stay_inside_the_repository():
    bad = []
    for md in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)", md.read_text()) + re.findall(r"`(\.\./shared/[^`]+)`", md.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (md.parent / target).resolve()
            if not path.is_relative_to(ROOT) or not path.exists():
                bad.append(f"{md.relative_to(ROOT)}: {target}")
    assert bad == []


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) < 250


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    assert [p for p in pages if p not in nav] == []


@pytest.mark.parametrize("figure", [f for f in FIGURES if not f.slow], ids=lambda f: f.where)
def test_the_figure_is_what_its_command_prints_now(figure):
    now = figures.render(figure, figures.run(figure.command, figure.exit_status, timeout=300))
    if now != figure.body:
        old, new = figure.body.splitlines(), now.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        pytest.fail(f"{figure.where}: the figure of `{figure.command}` is stale (run `make docs-figures`); "
                    f"first difference, line {first + 1} of the figure:\n"
                    f"  committed: {old[first] if first < len(old) else '(nothing)'}\n"
                    f"  now:       {new[first] if first < len(new) else '(nothing)'}")


def test_every_figure_shows_some_output():
    """A figure whose command prints nothing (a `sed` range that no longer matches) is a figure of nothing:
    the staleness test cannot see it, slow figures included."""
    empty = [f.where for f in FIGURES
             if not [line for line in f.body.splitlines() if line.strip() and not line.startswith(("```", "$ "))]]
    assert not empty, f"figures with no output: {', '.join(empty)}"


# ---------------------------------------------------------------------------------------------- the generator
def _page(tmp_path, text):
    path = tmp_path / "page.md"
    path.write_text(text)
    return path


def test_a_figure_is_the_command_then_its_output_in_a_text_block(tmp_path):
    path = _page(tmp_path, "intro\n<!-- figure: printf 'a  \\nb\\n' -->\nold\n<!-- end figure -->\nafter\n")
    stale = figures.refresh(path, log=lambda *_: None)
    assert [f.line for f in stale] == [2]
    assert path.read_text() == ("intro\n<!-- figure: printf 'a  \\nb\\n' -->\n```text\n$ printf 'a  \\nb\\n'\n"
                                "a\nb\n```\n<!-- end figure -->\nafter\n")     # trailing spaces dropped
    assert figures.refresh(path, log=lambda *_: None) == []                   # now up to date


def test_check_reports_a_stale_figure_and_changes_nothing(tmp_path):
    text = "<!-- figure: echo new -->\n```text\n$ echo new\nold\n```\n<!-- end figure -->\n"
    path = _page(tmp_path, text)
    assert len(figures.refresh(path, check=True, log=lambda *_: None)) == 1
    assert path.read_text() == text


def test_options_markdown_slow_and_exit_status(tmp_path):
    path = _page(tmp_path, "<!-- figure[markdown]: echo '| a |' -->\n<!-- end figure -->\n"
                           "<!-- figure[slow]: exit 3 -->\nkept\n<!-- end figure -->\n"
                           "<!-- figure[exit=2]: echo bad >&2; exit 2 -->\n<!-- end figure -->\n")
    [md, slow, err] = figures.find(path)
    assert (md.markdown, slow.slow, err.exit_status) == (True, True, 2)
    figures.refresh(path, fast=True, log=lambda *_: None)                      # the slow one is not run
    assert path.read_text() == ("<!-- figure[markdown]: echo '| a |' -->\n| a |\n\n"
                                "<sub>Generated by `echo '| a |'`.</sub>\n<!-- end figure -->\n"
                                "<!-- figure[slow]: exit 3 -->\nkept\n<!-- end figure -->\n"
                                "<!-- figure[exit=2]: echo bad >&2; exit 2 -->\n```text\n"
                                "$ echo bad >&2; exit 2\nbad\n```\n<!-- end figure -->\n")


@pytest.mark.parametrize("text, message", [
    ("<!-- figure: echo a -->\nno end\n", "1 figure markers but 0 closed"),
    ("<!-- figure[fast]: echo a -->\n<!-- end figure -->\n", "unknown figure option 'fast'"),
])
def test_a_bad_marker_is_one_clear_error(tmp_path, text, message):
    with pytest.raises(figures.FigureError, match=message):
        figures.find(_page(tmp_path, text))


def test_a_command_that_fails_unexpectedly_is_an_error_not_a_figure(tmp_path):
    text = "<!-- figure: echo oops >&2; exit 1 -->\n<!-- end figure -->\n"
    path = _page(tmp_path, text)
    with pytest.raises(figures.FigureError, match="exited with status 1, expected 0:\noops"):
        figures.refresh(path, log=lambda *_: None)
    assert path.read_text() == text


def test_a_marker_indented_in_an_example_is_not_a_figure(tmp_path):
    assert figures.find(_page(tmp_path, "```\n  <!-- figure: echo a -->\n  <!-- end figure -->\n```\n")) == []


# ---------------------------------------------------------------------------------------------- reference tables
reference = _load("docs_reference")


def test_json_fields_name_maps_and_lists_once():
    report = {"design": {"latency_us": 1.5, "passes": [{"name": "v3"}, {"name": "x"}]},
              "phase_us": {"A": 1.0, "B": 2.0}, "parity": None}
    assert reference.json_rows(report) == [
        ("design", "object", ""), ("design.latency_us", "float", "1.5"),
        ("design.passes", "list of 2", ""), ("design.passes[].name", "string", '"v3"'),
        ("phase_us.<name>", "object of 2", "A: 1.0"), ("parity", "null", "null")]


def test_the_cli_table_comes_from_the_parser_with_its_groups():
    table = reference.cli_table("kda.run", [])
    assert "| `--dtype {fp32,bf16,fp16}` | `bf16` |" in table
    assert "| `--no-numerics` |  | timing only" in table


def test_the_profile_table_marks_assumed_fields_and_ranges(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('description = "toy"\n[sync]\nlatency_us = { value = 0.5, source = "ASSUMED: none", '
                    'range = [0.1, 5.0] }\nbandwidth_gbps = 86.9\n')
    assert reference.profile_table(str(toml)).splitlines()[-2:] == [
        "| `sync.latency_us` | 0.5 | 0.1 - 5 | **ASSUMED**: none |", "| `sync.bandwidth_gbps` | 86.9 |  |  |"]
