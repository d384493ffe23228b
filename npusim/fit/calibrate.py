"""python -m npusim.calibrate MEASURED.csv [--profile ascend-910b2] [--out fitted.toml]

Fits the profile's ranged (ASSUMED) fields to measured kernel timings (a simple CSV or msprof's op
summary, see measurements.py) by bounded least squares (fit.py), and writes a profile whose fitted fields
carry `source = "FIT: <data file>, <date>"`. Fields the data cannot determine keep their value and their
ASSUMED source; the report says which and why. Bad input gets one line on stderr and exit status 2.
`--host-floor`: the timings are wall clock around a whole call (host dispatch included), so one constant
host time is fitted beside the fields (floor.py) and reported, not written into the profile.

Kernels are modelled by a kernel table (default `kda`, the entry point of kda.kernels.registry) with
`resolve(measurement)` returning an object with `predict(profile) -> us`: the runtime does not know the
programs, the table does. A table is named by its entry point (group npusim.kernels) or given as a file path,
never looked up as a bare module name (a file of that name in the working directory would run). Rows kept for
validation never enter the fit: a row marked `held_out = yes`, and every row of a kernel the table's
`held_out(kernel)` names (kda: the measured KDA kernels); they are skipped, and said so.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import importlib.util
import json
import math
import os
import sys
from importlib import metadata
from pathlib import Path

import tomli_w

from npusim.chip.floor import FloorPredictors
from npusim.chip.profile import _SECTIONS, Profile, load_profile
from npusim.command import as_command
from npusim.errors import NpuSimError
from npusim.fit.least_squares import Fit, batch_of, fit, typical_evaluations
from npusim.fit.measurements import read_measurements, unmapped
from npusim.fit.op_map import OpEntry, read_op_map
from npusim.fit.uncertainty import assumptions
from npusim.output import files

KERNELS_GROUP = "npusim.kernels"                 # entry points: name -> a module with resolve(measurement)
BUILTIN_KERNELS = {"kda": "kda.kernels.registry"}


def kernel_table(spec: str):
    """A kernel table: a module with resolve(measurement), and optionally check_models(models, profile,
    predictions, what) to refuse a fit too large before it starts. Named by its entry point of group
    npusim.kernels (`kda`: this project's), by that entry point's module, or given as a Python file by its
    path (a name with a slash or ending in .py). A bare module name is never looked up on sys.path: a file of
    that name in the working directory would run. NpuSimError (one line) otherwise."""
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        path = Path(spec)
        if not path.is_file():
            raise NpuSimError(f"--kernels {spec}: no such file")
        if path.suffix != ".py":
            raise NpuSimError(f"--kernels {spec}: a kernel table given by its path is a Python file (.py)")
        loader = importlib.util.spec_from_file_location(f"npusim_kernels_{abs(hash(str(path.resolve())))}", path)
        if loader is None or loader.loader is None:
            raise NpuSimError(f"--kernels {spec}: cannot load it as a Python module")
        module = importlib.util.module_from_spec(loader)
        try:
            loader.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - a user's file: any failure is one line
            raise NpuSimError(f"--kernels {spec}: cannot load it ({type(err).__name__}: {err})") from None
    else:
        tables = {**BUILTIN_KERNELS, **{ep.name: ep.value.split(":")[0]
                                        for ep in metadata.entry_points(group=KERNELS_GROUP)}}
        modules = {m: m for m in tables.values()}
        if spec not in tables and spec not in modules:
            raise NpuSimError(f"--kernels {spec!r}: not a kernel table; name one of {', '.join(sorted(tables))} "
                              f"(entry points of group {KERNELS_GROUP}), their modules, or a .py file by its path")
        try:
            module = importlib.import_module(tables.get(spec) or modules[spec])
        except ImportError as err:
            raise NpuSimError(f"--kernels {spec}: cannot import it ({err})") from None
    if not callable(getattr(module, "resolve", None)):
        raise NpuSimError(f"--kernels {spec}: not a kernel table (it has no function resolve(measurement))")
    return module


def kernel_origin(spec: str) -> str:
    """Where a kernel table comes from: a file's full path, or the module an entry point names."""
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        return str(Path(spec).resolve())
    return spec


def calibrate(path: str | Path, profile: Profile, kernels: str = "kda", fields=None,
              ignore_unknown: bool = False, host_floor: bool = False,
              ops: dict[str, OpEntry] | None = None) -> tuple[Fit, list, list[str]]:
    """Read, model and fit. Returns the fit, the measurements used, and notes (rows skipped). With
    `host_floor`, the timings are taken to include one constant host time (floor.py), solved at every step
    and kept in `Fit.host_floor_us`; without, they are kernel device times (msprof's Task Duration)."""
    table = kernel_table(kernels)
    resolve = table.resolve
    rows, models, notes = [], [], []
    kept = getattr(table, "held_out", None)
    if ops is not None:
        notes += [f"skipped {n} row(s) of {op} (not in the op map)" for op, n in unmapped(path, ops).items()]
    for m in read_measurements(path, ops):
        if m.held_out or (callable(kept) and kept(m.kernel)):
            notes.append(f"skipped {m.where()}: {m.kernel} is held out (validation only, never fitted)")
            continue
        try:
            models.append(resolve(m))
        except NpuSimError as err:
            if ignore_unknown and "unknown kernel" in str(err):
                notes.append(f"skipped {err}")
                continue
            raise
        rows.append(m)
    if not rows:
        why = "every row it could use is held out (validation only)" if any(" is held out " in n for n in notes) \
            else "no row names a kernel this model knows"
        raise NpuSimError(f"{path}: {why}")
    chosen = assumptions(profile)
    if fields:
        known = {f.field for f in chosen}
        unknown = [f for f in fields if f not in known]
        if unknown:
            raise NpuSimError(f"--fields: {unknown[0]!r} is not a ranged field of {profile.name} "
                              f"(ranged: {', '.join(sorted(known))})")
        chosen = [f for f in chosen if f.field in fields]
    if not chosen:
        raise NpuSimError(f"profile {profile.name}: no field has a range to fit")
    measured = [m.measured_us for m in rows]
    check_models = getattr(table, "check_models", None)
    if callable(check_models):                # a table that can weigh its models: before the fit starts
        check_models(models, profile, typical_evaluations(len(chosen)), "npusim.calibrate")
    if not host_floor:
        return fit(profile, chosen, [k.predict for k in models], measured, many=batch_of(models)), rows, notes
    fp = FloorPredictors(models, ["all"] * len(rows), measured)
    result = fit(profile, chosen, fp.predictors(), measured, many=fp.many)
    result.host_floor_us = fp.evaluate(result.profile)[1]["all"]
    return result, rows, notes


def profile_toml(fitted: Profile, result: Fit, data: str, date: str) -> str:
    """The whole profile as TOML (values written by tomli_w), every field with its source; fitted fields
    say FIT."""
    fit_by = {f.field: f for f in result.fields if f.determined}
    doc: dict = {"name": fitted.name, "description": fitted.description}
    raw = fitted.as_dict()
    for section in _SECTIONS:
        doc[section] = {}
        for name, value in raw[section].items():
            key = f"{section}.{name}"
            entry: dict = {"value": value}
            if key in fit_by:
                f = fit_by[key]
                note = f", {f.rel_se:.1%} standard error" if math.isfinite(f.rel_se) else ""
                bound = ", at a bound of its range" if f.at_bound else ""
                source = f"FIT: {data}, {date} (prior {f.prior:g}{note}{bound})"
            else:
                source = fitted.sources.get(key, "")
                undetermined = next((f for f in result.fields if f.field == key and not f.determined), None)
                if undetermined is not None:
                    source += f" [not fitted to {data}: {undetermined.why}]"
            if source:
                entry["source"] = source
            if key in fitted.ranges:
                entry["range"] = list(fitted.ranges[key])
                entry["range_reason"] = fitted.range_reasons[key]
            doc[section][name] = entry
    lines = [f"# Calibrated by python -m npusim.calibrate from {_one_line(data)} on {_one_line(date)}.",
             _toml_pair("name", doc["name"]), _toml_pair("description", doc["description"])]
    for section in _SECTIONS:         # one line per field, an inline table as in the shipped profiles
        lines += ["", f"[{section}]"]
        lines += [f"{name} = {{ {', '.join(_toml_pair(k, v) for k, v in entry.items())} }}"
                  for name, entry in doc[section].items()]
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """`text` for a TOML comment: its control characters (a newline would end the comment) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _toml_pair(key: str, value) -> str:
    """'key = value' with the value as tomli_w writes it (quoting, escapes, inf and nan); arrays on one line."""
    if isinstance(value, (list, tuple)):
        return f"{key} = [{', '.join(_toml_pair('v', x)[4:] for x in value)}]"
    return tomli_w.dumps({key: value}).strip()


def report_lines(result: Fit, rows) -> list[str]:
    out = [f"{len(rows)} measurements, {result.evaluations} simulations, {result.iterations} iterations; "
           f"rms relative error {result.rms_before:.1%} before, {result.rms_after:.1%} after"]
    for f in result.fields:
        if f.determined:
            bound = " (at a bound of its range)" if f.at_bound else ""
            out.append(f"  {f.field}: {f.prior:g} -> {f.value:.4g} (+-{f.rel_se:.1%}){bound}")
        else:
            out.append(f"  {f.field}: not determined, stays {f.prior:g}: {f.why}")
    if result.host_floor_us is not None:
        out.append(f"  host floor: {result.host_floor_us:.1f} us in every measurement (fitted with the fields; "
                   f"not a profile field, not written)")
    for m, b, a in zip(rows, result.before, result.after):
        out.append(f"  {m.where()}: {m.kernel} {m.shape} {m.dtype}: measured {m.measured_us:.1f} us, "
                   f"predicted {b:.1f} -> {a:.1f} us")
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message):               # one line, exit 2 (argparse prints usage too)
        raise SystemExit(_fail(f"{self.prog}: {message}"))


EXAMPLES = """examples:
  # fit the assumed fields of the shipped profile to your timings, and write the fitted profile
  python -m npusim.calibrate my_timings.csv --out my-910b.toml
  # msprof's op summary, other operators skipped, only two fields
  python -m npusim.calibrate op_summary_0.csv --ignore-unknown --fields sync.latency_us,cube.fp32_macs_per_cycle
  # your own operators' names, through an op map (kernel, stage, input order, held_out of each OP Type)
  python -m npusim.calibrate op_summary_0.csv --ops my_ops.toml"""


@as_command
def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m npusim.calibrate", description=__doc__.splitlines()[0], epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", type=Path, help="measured timings: a CSV with kernel, shape, dtype, measured_us, "
                   "or msprof's op_summary_*.csv")
    p.add_argument("--profile", default="ascend-910b2", metavar="NAME|FILE.toml",
                   help="profile to start from (default: ascend-910b2)")
    p.add_argument("--out", type=Path, metavar="FILE.toml", help="write the fitted profile here (default: print it)")
    p.add_argument("--fields", metavar="FIELD,...", help="comma-separated fields to fit (default: every ranged field)")
    p.add_argument("--kernels", default="kda", metavar="NAME|FILE.py",
                   help="the kernel table: an entry point of group npusim.kernels (kda: this project's "
                        "kda.kernels.registry), or a Python file with resolve(measurement), by its path")
    p.add_argument("--ignore-unknown", action="store_true", help="skip rows of kernels the model does not know "
                   "(other operators in an msprof summary) instead of failing")
    p.add_argument("--ops", type=Path, metavar="FILE.toml", help="an op map for an msprof op summary: each OP "
                   "Type's kernel, stage, input order and held_out; other operators' rows are skipped")
    p.add_argument("--host-floor", action="store_true", help="the timings include a constant host time "
                   "(wall clock around a Python call): fit it too, apart from the profile")
    p.add_argument("--date", help="date to write in the FIT sources (default: today, UTC)")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    args = p.parse_args(argv)
    if args.date is not None and not (args.date.strip() and args.date.isprintable()):
        return _fail(f"--date {args.date!r}: one line of printable text, e.g. 2026-11-23")
    try:
        if args.out is not None:
            files.check_writable("--out", args.out)                     # before the fit, not after
    except files.OutputError as err:
        return _fail(str(err))
    try:
        profile = load_profile(args.profile)
        fields = [x.strip() for x in args.fields.split(",") if x.strip()] if args.fields is not None else None
        if fields == []:
            raise NpuSimError(f"--fields {args.fields!r} names no field (leave it out to fit every ranged field)")
        ops = read_op_map(args.ops) if args.ops is not None else None
        result, rows, notes = calibrate(args.data, profile, args.kernels, fields, args.ignore_unknown,
                                        args.host_floor, ops)
    except NpuSimError as err:
        return _fail(str(err))
    date = args.date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    fitted = dataclasses.replace(result.profile, name=f"{profile.name}-fit",
                                 description=f"{profile.description}; assumed fields fitted to {args.data.name}")
    text = profile_toml(fitted, result, args.data.name, date)
    for n in notes:
        print(n, file=sys.stderr)
    if args.json:
        print(json.dumps({"kernels": kernel_origin(args.kernels), "rms_before": result.rms_before,
                          "rms_after": result.rms_after,
                          "host_floor_us": result.host_floor_us,
                          "fields": [f.to_dict() for f in result.fields]}, indent=2))
    else:
        print("\n".join(report_lines(result, rows)))
    if args.kernels not in BUILTIN_KERNELS:
        print(f"kernel table: {kernel_origin(args.kernels)}", file=sys.stderr)
    if args.out is not None:
        try:
            files.write_text("--out", args.out, text)
        except files.OutputError as err:       # the fit is done: print it rather than lose it
            print(text)
            return _fail(f"{err}; the fitted profile is printed above")
        print(f"wrote {args.out}", file=sys.stderr)
    elif not args.json:
        print(text)
    return 0


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
