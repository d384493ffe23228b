"""Designs from outside the package, registered for the process: a file's `path/to/my_design.py:NAME` (NAME a
per-chunk phase program or a Design of passes), or an installed package's entry point in the group
`kda.designs` (its name the design's, loaded only when that name is asked for).

A design is checked once: the file exists and imports, NAME is in it and is a program or a design, its name
is not a built-in design's nor another file's. Anything wrong is a UserDesignError, one line naming the file
(or entry point) and what is wrong. A name resolved here runs wherever a built-in name does."""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path

from npusim.model.schedule import Design, single_pass
from npusim.record.program import PhaseProgram

GROUP = "kda.designs"
RESERVED = ("all",)                  # what the tools read as every built-in design

REGISTERED: dict[str, Design] = {}       # a registered design's name -> its design
PROGRAMS: dict[str, PhaseProgram] = {}   # the per-chunk program of a registered one-pass design
ORIGINS: dict[str, str] = {}             # a registered name -> where it came from (file:NAME or entry point)
_LOADED: dict[str, str] = {}             # a resolved file:NAME -> the name it registered


class UserDesignError(ValueError):
    """A design from a file or an entry point that cannot be used; the message is one line."""


def is_file_spec(text: object) -> bool:
    """Whether `text` names a design in a file: `path/to/file.py:NAME`."""
    if not isinstance(text, str) or ":" not in text:
        return False
    path, _, name = text.rpartition(":")
    return path.endswith(".py") and bool(name)


def resolve(text: str, builtins: Mapping[str, Design]) -> str | None:
    """The registered name `text` stands for: a name already registered, a file's design (loaded and
    registered) or an entry point of GROUP (loaded and registered); None when it is none of these."""
    if is_file_spec(text):
        return load_file(text, builtins)
    if text in REGISTERED:
        return text
    return load_entry_point(text, builtins)


def load_file(spec: str, builtins: Mapping[str, Design]) -> str:
    """Load `path.py:NAME`, check it and register it; its design's name. Loading one twice loads it once."""
    path_text, _, attr = spec.rpartition(":")
    path = Path(path_text).expanduser()
    key = f"{path.resolve()}:{attr}"
    if key in _LOADED:
        return _LOADED[key]
    if not path.is_file():
        raise UserDesignError(f"{path_text}: no such file (a design is named path/to/file.py:NAME)")
    module = _import(path, path_text)
    if not attr.isidentifier() or not hasattr(module, attr):
        raise UserDesignError(f"{path_text}: has no {attr!r} (a @phase_program function or a Design of passes)")
    name = register(getattr(module, attr), f"{path_text}:{attr}", builtins)
    _LOADED[key] = name
    return name


def load_entry_point(name: str, builtins: Mapping[str, Design]) -> str | None:
    """The design an installed package declares under GROUP with this name, registered; None if none does."""
    from importlib.metadata import entry_points
    found = list(entry_points(group=GROUP, name=name)) if isinstance(name, str) else []
    if not found:
        return None
    ep = found[0]
    where = f"entry point {name} = {ep.value} ({GROUP})"
    try:
        obj = ep.load()
    except Exception as err:  # noqa: BLE001 - whatever the package raises is one line here
        raise UserDesignError(f"{where}: does not import: {_one_line(err)}") from None
    registered = register(obj, where, builtins)
    if registered != name:
        del REGISTERED[registered], ORIGINS[registered]
        PROGRAMS.pop(registered, None)
        raise UserDesignError(f"{where}: the design is named {registered!r}, not {name!r}: the entry point's "
                              f"name must be the design's")
    return registered


def register(obj: object, origin: str, builtins: Mapping[str, Design]) -> str:
    """Check a program or design and register it under its name; UserDesignError naming `origin` otherwise."""
    if isinstance(obj, PhaseProgram):
        design, program = single_pass(obj), obj
    elif isinstance(obj, Design):
        design, program = obj, None
    else:
        raise UserDesignError(f"{origin} is a {type(obj).__name__}, not a per-chunk phase program "
                              f"(@phase_program) nor a Design of passes (npusim.model.schedule.Design)")
    name = design.name
    if not isinstance(name, str) or not name or ":" in name or name in RESERVED:
        raise UserDesignError(f"{origin}: the design's name {name!r} cannot be used (a name without ':', "
                              f"not {', '.join(RESERVED)})")
    if name in builtins:
        raise UserDesignError(f"{origin}: its name {name!r} is a built-in design's: give it another name")
    if name in REGISTERED and REGISTERED[name] is not design and ORIGINS[name] != origin:
        raise UserDesignError(f"{origin}: its name {name!r} is already the design of {ORIGINS[name]}")
    if not design.passes:
        raise UserDesignError(f"{origin}: the design {name!r} has no passes")
    REGISTERED[name], ORIGINS[name] = design, origin
    if program is not None:
        PROGRAMS[name] = program
    return name


def source_digest(text: str) -> str | None:
    """sha256 of a file design's source (a cache key's part: an edited file is a new design); None otherwise."""
    if not is_file_spec(text):
        return None
    path = Path(text.rpartition(":")[0]).expanduser()
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _import(path: Path, shown: str):
    """The module of a file, by path; any exception it raises is one line naming the file."""
    name = "kda_user_design_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserDesignError(f"{shown}: cannot be imported as Python (a design file ends in .py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module               # dataclasses and pickling look a module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException as err:  # noqa: BLE001 - the file is the user's: its failure is one line
        del sys.modules[name]
        if isinstance(err, KeyboardInterrupt):
            raise
        raise UserDesignError(f"{shown}: does not import: {_one_line(err)}") from None
    return module


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
