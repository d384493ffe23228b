"""Results cached by a hash of each point's settings, the project's version and sources, and the profile
file's contents: an interrupted or extended sweep runs only the points it has not finished.

The cache is one JSON line per finished point, appended as each arrives: its key, its row and a digest of
both. A line that cannot be used (cut short by an interrupt, not text, not JSON, or whose row no longer
matches its digest: edited or damaged) is skipped on reading, and its point runs again. The digest is a
check of integrity, not a signature: anyone who can write the file can write a matching digest."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from importlib import metadata, resources
from pathlib import Path
from typing import TextIO

import npusim

import kda
from kda.programs.user import source_digest


@functools.lru_cache(maxsize=1)
def project_version() -> str:
    """The package version and a digest of every source file of kda and npusim: a changed model is a
    different project, whatever its version number says."""
    try:
        version = metadata.version("kda-npusim")
    except metadata.PackageNotFoundError:
        version = "unknown"
    h = hashlib.sha256()
    for pkg in (kda, npusim):
        root = Path(pkg.__file__).parent
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return f"{version}+{h.hexdigest()[:16]}"


def profile_digest(name_or_path: str, seen: frozenset = frozenset()) -> str:
    """sha256 of the profile file, and of every file it inherits from (read each time: a file edited
    between two sweeps of one process is a new profile)."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        data = path.read_bytes() if path.is_file() else b""
    else:
        res = resources.files("npusim") / "profiles" / f"{name_or_path}.toml"
        data = res.read_bytes() if res.is_file() else b""
    h = hashlib.sha256(data)
    try:
        import tomllib
        parent = tomllib.loads(data.decode("utf-8")).get("inherits")
    except (ValueError, UnicodeDecodeError):
        parent = None
    if isinstance(parent, str) and parent not in seen:
        if path.parent != Path(".") and (parent.endswith(".toml") or "/" in parent):
            parent = str(path.parent / parent)           # relative to the file, as load_profile reads it
        h.update(profile_digest(parent, seen | {str(name_or_path)}).encode())
    return h.hexdigest()


def point_key(version: str, settings) -> str:
    payload = {"version": version, "settings": dataclasses.asdict(settings), "project": project_version(),
               "profile": profile_digest(settings.profile)}
    source = source_digest(version)
    if source is not None:             # a design in the user's file: an edited file is a new design
        payload["design_source"] = source
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def row_digest(key: str, row: dict) -> str:
    """sha256 of a cache entry's key and row, as JSON with sorted keys."""
    return hashlib.sha256(json.dumps({"key": key, "row": row}, sort_keys=True, default=str).encode()).hexdigest()


class Cache:
    """Rows by point key, in a JSON-lines file; `None` path: no cache. `skipped`: lines that could not be used."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.rows: dict[str, dict] = {}
        self.skipped = 0
        if self.path is not None and self.path.is_file():
            for line in self.path.read_bytes().splitlines():
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line.decode("utf-8"))
                    key, row, digest = entry["key"], entry["row"], entry["digest"]
                except (ValueError, KeyError, TypeError):     # UnicodeDecodeError is a ValueError
                    self.skipped += 1                         # cut short, binary, not an entry
                    continue
                if not isinstance(key, str) or not isinstance(row, dict) or digest != row_digest(key, row):
                    self.skipped += 1                         # edited or damaged: run the point again
                    continue
                self.rows[key] = row
        self._file: TextIO | None = None

    def get(self, key: str) -> dict | None:
        return self.rows.get(key)

    def add(self, key: str, row: dict) -> None:
        self.rows[key] = row
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            cut = self.path.is_file() and self.path.stat().st_size and self.path.read_bytes()[-1:] != b"\n"
            self._file = self.path.open("a", encoding="utf-8")
            if cut:                        # a last line cut short must not swallow this row
                self._file.write("\n")
        self._file.write(json.dumps({"key": key, "row": row, "digest": row_digest(key, row)}) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
