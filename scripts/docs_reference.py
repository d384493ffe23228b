"""Reference tables for the docs, generated from the code so that they cannot drift from it:

    python scripts/docs_reference.py cli kda.run               # a CLI's options, from its argparse parser
    python scripts/docs_reference.py cli kda.sweep plot        # ... with leading arguments (a sub-command)
    python -m kda.run --no-numerics --json | python scripts/docs_reference.py json   # a --json report's fields
    python scripts/docs_reference.py profile ascend-910b2      # a hardware profile's fields, values and sources
    python scripts/docs_reference.py layout                    # the package folders and their module maps

Each prints a markdown table; scripts/docs_figures.py writes it into the docs (figures marked `markdown`).
"""
from __future__ import annotations

import argparse
import json
import re
import runpy
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))          # this checkout's kda and npusim, not another one pip installed


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------- CLI options
class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def capture_parser(module: str, argv: list[str]) -> argparse.ArgumentParser:
    """The parser `python -m MODULE ARGV...` parses its options with: run the module as `python -m` would,
    and stop it at its first parse_args."""
    def stop(self, args=None, namespace=None):
        raise _Captured(self)
    saved = (argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args, sys.argv)
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = stop
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except _Captured as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args, sys.argv = saved
    raise SystemExit(f"error: python -m {module} {' '.join(argv)} parsed no options")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = parser.prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    try:
        return action.help % params
    except (KeyError, TypeError, ValueError):
        return action.help


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    nargs0 = action.nargs == 0
    if action.choices is not None and not nargs0:
        arg = "{" + ",".join(map(str, action.choices)) + "}"
    elif action.metavar is not None:
        arg = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    else:
        arg = {int: "N", float: "X", Path: "PATH"}.get(action.type, action.dest.upper())
    return ", ".join(f"`{o}`" if nargs0 else f"`{o} {arg}`" for o in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ""):
        return ""
    return f"`{action.default}`"


def cli_table(module: str, argv: list[str]) -> str:
    parser = capture_parser(module, argv)
    lines = []
    if parser.description:
        lines += [parser.description.strip(), ""]
    for group in parser._action_groups:                     # the parser's help groups, in its order
        actions = [a for a in group._group_actions
                   if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        lines += [f"**{group.title}**" + (f": {group.description}" if group.description else ""), "",
                  "| option or argument | default | meaning |", "|---|---|---|"]
        lines += [f"| {cell(_name(a))} | {cell(_default(a))} | {cell(_help(parser, a))} |" for a in actions]
        lines.append("")
    return "\n".join(lines).rstrip()


# ---------------------------------------------------------------------------------------------- JSON fields
_FIELD = re.compile(r"^[a-z][a-z0-9_]*$")


def _example(value) -> str:
    text = json.dumps(value)
    if isinstance(value, float):
        text = f"{value:.6g}"
        text = text if any(c in text for c in ".eni") else text + ".0"       # 1.0 stays a float
    return text if len(text) <= 40 else text[:37] + "..."


def json_rows(value, path: str = "") -> list[tuple[str, str, str]]:
    """(path, type, example) for every field; a dict keyed by names (tensors, phases, payloads) is one row
    `path.<name>`, a list one row `path[]` and its first element's fields."""
    kind = {dict: "object", list: "list", str: "string", bool: "bool", int: "int", float: "float",
            type(None): "null"}[type(value)]
    if isinstance(value, dict) and value and not all(_FIELD.match(k) for k in value):
        first = next(iter(value))
        rows = [(f"{path}.<name>", f"object of {len(value)}", f"{first}: {_example(value[first])}")]
        return rows + [r for r in json_rows(value[first], f"{path}.<name>")[1:]]
    if isinstance(value, dict):
        rows = [(path, kind, "")] if path else []
        for k, v in value.items():
            rows += json_rows(v, f"{path}.{k}" if path else k)
        return rows
    if isinstance(value, list):
        rows = [(path, f"list of {len(value)}", "")]
        return rows + ([r for r in json_rows(value[0], f"{path}[]") if r[0] != f"{path}[]"]
                       if value and isinstance(value[0], (dict, list))
                       else [(f"{path}[]", type(value[0]).__name__ if value else "", _example(value[0]) if value
                              else "")])
    return [(path, kind, _example(value))]


def json_table(text: str) -> str:
    rows = json_rows(json.loads(text))
    out = ["| field | type | example |", "|---|---|---|"]
    out += [f"| `{cell(p)}` | {cell(t)} | {cell(f'`{e}`' if e else '')} |" for p, t, e in rows if p]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- profile fields
def profile_table(name: str) -> str:
    path = Path(name) if name.endswith(".toml") else ROOT / "npusim" / "profiles" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    out = [f"`{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`: {data.get('description', '')}",
           "", "| field | value | range | source |", "|---|---|---|---|"]
    for section, table in data.items():
        if not isinstance(table, dict):
            continue
        for field, entry in table.items():
            entry = entry if isinstance(entry, dict) else {"value": entry}
            rng = entry.get("range")
            source = entry.get("source", "")
            if source.startswith("ASSUMED"):
                source = "**ASSUMED**" + source[len("ASSUMED"):]
            out.append(f"| `{section}.{field}` | {cell(entry.get('value', ''))} | "
                       f"{cell(f'{rng[0]:g} - {rng[1]:g}' if rng else '')} | {cell(source)} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- layout
def layout_text(packages=("npusim", "kda")) -> str:
    """Each package folder with its __init__.py docstring (the folder's map of modules)."""
    import ast
    out = []
    for package in packages:
        for init in [ROOT / package / "__init__.py", *sorted((ROOT / package).rglob("*/__init__.py"))]:
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            folder = init.parent.relative_to(ROOT).as_posix() + "/"
            out += [f"**`{folder}`**", "", "```text", doc.strip(), "```", ""]
    return "\n".join(out).rstrip()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["cli"] and len(argv) >= 2:
        print(cli_table(argv[1], argv[2:]))
    elif argv == ["json"]:
        print(json_table(sys.stdin.read()))
    elif argv[:1] == ["profile"] and len(argv) == 2:
        print(profile_table(argv[1]))
    elif argv == ["layout"]:
        print(layout_text())
    else:
        print("usage: docs_reference.py cli MODULE [ARG...] | json < REPORT.json | profile NAME|PATH | layout",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
