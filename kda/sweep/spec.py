"""A sweep spec (TOML): axes and their values, fixed settings, the metrics to keep, numerics on or off.

    numerics = false                      # default true
    metrics = ["layer.latency_us", "errors"]   # columns to keep, by dotted name or prefix; default: all

    [axes]                                # every combination is one point; the first axis varies slowest
    version = ["v3", "v4"]                # any long option of `python -m kda.run`, without the dashes
    chunk-size = [32, 64, 128]
    "sync.latency_us" = [0.3, 0.5, 1.0]   # SECTION.FIELD: a profile field (kda.cli.run's --set)

    [fixed]
    heads = 32
    tokens = 131072

Option values go through kda.cli.run's own parser and `settings_from_args`, so every option `kda.cli.run` grows is an axis
here, checked the same way. A spec that names an unknown option, an empty axis or a value the option does
not take is a `SpecError` (one line); a combination that fails only when run becomes an error row.
"""
from __future__ import annotations

import argparse
import functools
import itertools
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from npusim import NpuSimError
from npusim.model.limits import MAX_POINTS, check

from kda.cli.checks import check_args
from kda.cli.run import build_parser, parse_args
from kda.cli.run_options import settings_from_args
from kda.driver.checks import KdaInputError
from kda.programs import DEFAULT_DESIGN, DESIGNS, resolve
from kda.settings import Settings
from kda.settings.profile import profile_for

# kda.cli.run options that shape output, not the run: not axes
NOT_AXES = {"json": "an output format", "trace": "an output file", "plot": "an output file",
            "trace-window": "a cut of the output file",
            "strict": "an exit-status rule", "serial": "a display choice", "help": "help",
            "inputs": "a file of tensors (a sweep generates its inputs)",
            "set": "written as SECTION.FIELD axes, e.g. \"sync.latency_us\"",
            "no-numerics": "set `numerics = false` at the top of the spec",
            "backward": "the backward pass, which sweeps do not run yet (python -m kda.run --backward does)",
            "states": "a --backward option, which sweeps do not run yet"}


class SpecError(ValueError):
    """A sweep spec that cannot run: one line naming what is wrong."""


@dataclass(frozen=True)
class Point:
    index: int
    version: str
    values: dict          # axis column -> value, for this point
    settings: Settings


@dataclass(frozen=True)
class Spec:
    axes: dict            # option name (kda.cli.run's, with dashes, or SECTION.FIELD) -> list of values
    fixed: dict
    metrics: tuple[str, ...] = ()
    numerics: bool = True
    origin: str = "spec"

    @property
    def columns(self) -> dict[str, str]:
        """Option name -> table column (kda.cli.run's dest: chunk-size -> chunk_size; overrides unchanged)."""
        return {name: column(name) for name in {**self.fixed, **self.axes}}

    def keep_trace(self) -> bool:
        """The overlap metrics need every event of the pipelined run; nothing else does."""
        return not self.metrics or any(m == "overlap" or m.startswith("overlap.") for m in self.metrics)

    def size(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def points(self) -> list[Point]:
        names = list(self.axes)
        out = []
        for i, combo in enumerate(itertools.product(*(self.axes[n] for n in names))):
            values = dict(zip(names, combo))
            options = {**self.fixed, **values}
            out.append(Point(i, str(options.get("version", _default("version") or DEFAULT_DESIGN)),
                             {column(n): v for n, v in values.items()},
                             point_settings(options, self.numerics, self.keep_trace())))
        return out


def column(name: str) -> str:
    return name if "." in name else name.replace("-", "_")


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    p = build_parser()

    def error(message):               # kda.cli.run's parser exits; a spec check raises instead
        raise SpecError(message)
    p.error = error
    return p


@functools.lru_cache(maxsize=1)
def _options() -> dict[str, argparse.Action]:
    return {o[2:]: a for a in _parser()._actions for o in a.option_strings if o.startswith("--")}


def _default(name: str):
    return _options()[name].default


def argv(options: dict, numerics: bool = True) -> list[str]:
    """kda.cli.run's command line for these options (version excluded: it is not a Settings field)."""
    acts = _options()
    out = [] if numerics else ["--no-numerics"]
    for name, value in options.items():
        if name == "version":
            continue
        if "." in name:
            out += ["--set", f"{name}={value}"]
        elif isinstance(acts[name], argparse._StoreTrueAction):
            out += [f"--{name}"] if value else []
        else:
            out += [f"--{name}", ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return out


def point_settings(options: dict, numerics: bool = True, keep_trace: bool = True) -> Settings:
    """Settings of one point, as `python -m kda.run` would build them from the same options."""
    args = parse_args(argv(options, numerics), _parser())
    check_args(args)
    settings = settings_from_args(args)
    return settings if keep_trace else replace(settings, keep_trace=False)


MAX_SPEC_BYTES = 1 << 20          # a spec file read past this is not a spec


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        if path.exists() and not path.is_file():
            raise SpecError(f"{path}: not a regular file (a folder, a device or a pipe)")
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise SpecError(f"{path}: over {MAX_SPEC_BYTES // 1024} KiB; a spec is a few lines of TOML")
        raw = tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise SpecError(f"{path}: not a readable TOML file ({err})") from None
    return parse_spec(raw, str(path))


def parse_spec(raw: dict, origin: str = "spec") -> Spec:
    """A spec from a dict of the TOML's shape; every axis value is checked through kda.cli.run's parser."""
    if not raw:                       # an empty file would run kda.run's defaults as if that was asked
        raise SpecError(f"{origin}: an empty spec: give [axes] (the values to sweep) and/or [fixed]")
    unknown = set(raw) - {"axes", "fixed", "metrics", "numerics"}
    if unknown:
        raise SpecError(f"{origin}: unknown key {sorted(unknown)[0]!r} (a spec has [axes], [fixed], metrics, "
                        f"numerics)")
    axes, fixed = raw.get("axes", {}), raw.get("fixed", {})
    if not isinstance(axes, dict) or not isinstance(fixed, dict):
        raise SpecError(f"{origin}: [axes] and [fixed] must be tables")
    numerics = raw.get("numerics", True)
    if not isinstance(numerics, bool):
        raise SpecError(f"{origin}: numerics must be true or false, got {numerics!r}")
    metrics = raw.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) and m for m in metrics):
        raise SpecError(f"{origin}: metrics must be a list of column names, e.g. [\"layer.latency_us\"]")
    axes = {_name(k, origin, "axis"): v for k, v in axes.items()}
    fixed = {_name(k, origin, "fixed setting"): v for k, v in fixed.items()}
    both = set(axes) & set(fixed)
    if both:
        raise SpecError(f"{origin}: {sorted(both)[0]!r} is both an axis and a fixed setting")
    for name, values in axes.items():
        if not isinstance(values, list):
            raise SpecError(f"{origin}: axis {name!r} must be a list of values, got {values!r}")
        if not values:
            raise SpecError(f"{origin}: axis {name!r} has no values")
        if name == "version" and "all" in values:
            axes[name] = [x for v in values for x in (list(DESIGNS) if v == "all" else [v])]
    if fixed.get("version") == "all":
        raise SpecError(f"{origin}: fixed version 'all': make version an axis to run every design")
    spec = Spec(axes, fixed, tuple(metrics), numerics, origin)
    try:                                   # before a list of that many points is made
        check(f"{origin}: the grid's points", spec.size(), MAX_POINTS)
    except NpuSimError as err:
        raise SpecError(str(err)) from None
    _check(spec)
    return spec


def _name(key: str, origin: str, what: str) -> str:
    if "." in key:
        return key
    name = key.replace("_", "-")
    if name in NOT_AXES:
        raise SpecError(f"{origin}: {name!r} cannot be swept or fixed: it is {NOT_AXES[name]}")
    if name not in _options():
        known = sorted(k for k in _options() if k not in NOT_AXES)
        raise SpecError(f"{origin}: unknown {what} {key!r}: kda.cli.run's options are {', '.join(known)}, "
                        f"or a profile field SECTION.FIELD")
    return name


def _check(spec: Spec) -> None:
    """Each fixed setting and each axis value alone (with the fixed settings) must make valid settings."""
    trials = [(None, None, {})] + [(n, v, {n: v}) for n, values in spec.axes.items() for v in values]
    for name, value, extra in trials:
        options = {**spec.fixed, **extra}
        where = f"axis {name!r} value {value!r}" if name else "[fixed]"
        version = options.get("version", _default("version") or DEFAULT_DESIGN)
        try:                  # a built-in name, or a file's path.py:NAME loaded and checked once
            resolve(version)
        except ValueError as err:
            raise SpecError(f"{spec.origin}: {where}: {err}") from None
        bad = [(n, v) for n, v in options.items() if not _value_ok(n, v)]
        if bad:
            raise SpecError(f"{spec.origin}: {where}: {bad[0][0]} does not take {bad[0][1]!r}")
        try:
            profile_for(point_settings(options, spec.numerics))
        except (SpecError, KdaInputError, NpuSimError, ValueError) as err:
            raise SpecError(f"{spec.origin}: {where}: {err}") from None


def _value_ok(name: str, value) -> bool:
    """The TOML type fits the option: numbers for profile fields, true/false for switches, a list only
    where kda.cli.run takes a comma-separated one."""
    if "." in name:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(_options()[name], argparse._StoreTrueAction):
        return isinstance(value, bool)
    if isinstance(value, list):
        return name in ("seqlens", "resident", "precision") and not any(isinstance(x, (list, dict)) for x in value)
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
