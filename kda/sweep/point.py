"""One point of a sweep: `kda.studies.evaluate.evaluate(version, settings)`, flattened into one row; or the
points of one design that differ only in profile fields, recorded once and timed on each profile by the
compiled event model (the same rows). Runs on a Dask worker or in-process; a point that fails is a row with
its error, never an exception."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import partial
from typing import Callable

from npusim import NpuSimError
from npusim.model.whatif.runs import CompiledRuns
from npusim.model.workspace import analyse as workspace_use

from kda.driver.checks import KdaInputError
from kda.settings import Settings
from kda.settings.profile import checked_profile
from kda.studies.evaluate import VersionResult, evaluate, retime
from kda.studies.probe import probe_results
from kda.studies.timing import chunk_counts

OK, FAILED = "ok", "failed"


def run_point(version: str, settings: Settings, threads: int | None = None) -> tuple[dict, bool]:
    """(row, cacheable): the row holds `status`, `error` and every metric of the --json report, flattened
    to dotted columns, with `safe` and the timing-only probe's `probe.*`. Errors of the input (a bad
    combination, a workspace or a phase that does not fit, an overflow, numerics that fail parity) are results
    and cacheable; anything else (a crash) is reported but run again next time."""
    _threads(threads)
    return _row_of(lambda: evaluate(version, settings))[:2]


def run_points(version: str, variants: list[Settings],
               threads: int | None = None) -> tuple[list[tuple[dict, bool]], list[str]]:
    """(run_point of each of `variants`, notes): timing-only settings of one design that differ only in
    profile fields (`overrides`). The phase graphs do not depend on the profile: they are recorded once, and
    each variant is timed on its own profile from them by the compiled event model (timing.time_result with
    `runs`), as its own evaluation would time it on the event model: the same rows. Where the compiled model
    cannot serve a replay, the event model replays it; the notes say so, once each. Where recording fails,
    each variant runs alone."""
    _threads(threads)
    try:
        recorded = evaluate(version, variants[0], timing=False)
    except Exception:  # noqa: BLE001 - each point's own evaluation says what is wrong, in its row
        return [run_point(version, s) for s in variants], []
    s = recorded.settings
    runs = CompiledRuns(recorded.design, chunk_counts(s), interleave=s.interleave)
    return [_row_of(partial(_timed, recorded, v, runs))[:2] for v in variants], runs.notes


def _timed(recorded: VersionResult, settings: Settings, runs: CompiledRuns) -> VersionResult:
    """What evaluate(version, settings) gives, from `recorded`'s graphs: only the profile differs."""
    return retime(replace(recorded, settings=settings, probe=None), checked_profile(settings), runs=runs)


def _threads(threads: int | None) -> None:
    if threads:
        import torch
        torch.set_num_threads(threads)


def _row_of(evaluation: Callable[[], VersionResult]) -> tuple[dict, bool, VersionResult | None]:
    """(row, cacheable, the result or None where it raised) of one evaluation."""
    try:
        r = evaluation()
        probe_results([r])               # timing only: a few chunks of numerics say if it stays finite
        data = r.to_json()
    except (KdaInputError, NpuSimError, ValueError) as err:
        return {"status": FAILED, "error": str(err)}, True, None
    except Exception as err:  # noqa: BLE001 - a sweep outlives any one point
        return {"status": FAILED, "error": f"{type(err).__name__}: {err}"}, False, None
    data["workspace_kib"] = workspace_kib(r)
    error = (r.workspace_error or getattr(r, "capacity_error", None) or _overflow_text(data.get("overflow"))
             or _parity_text(data.get("parity")))
    return {"status": FAILED if error else OK, "error": error, **flatten(data)}, True, r


def workspace_kib(r) -> dict:
    """What the design's GM workspace must hold per AI core: its resident region, one ping/pong slot at its
    peak, and resident + slots x slot (the largest over the passes, which run one after another)."""
    slots = r.profile.workspace.slots
    uses = [workspace_use(g) for g in r.execution.pass_graphs]
    need = [(u.resident_bytes, u.slot_peak) for u in uses]
    return {"resident": max(a for a, _ in need) / 1024, "slot": max(b for _, b in need) / 1024,
            "needed": max(a + slots * b for a, b in need) / 1024}


def _overflow_text(o: dict | None) -> str | None:
    if not o:
        return None
    return f"overflow: inf/NaN first in {o.get('tensor')} ({o.get('where') or o.get('phase')}, chunk {o.get('chunk')})"


def _parity_text(p: dict | None) -> str | None:
    """A point whose numerics fail parity failed, as `kda.run --strict` says (its row keeps the numbers)."""
    if not p or p.get("pass") is not False:
        return None
    def num(x):
        return "inf/NaN" if x is None else f"{x:.3g}"
    errs = f"output rel RMS {num(p.get('rel_rms_err'))}, final state {num((p.get('state') or {}).get('rel_rms_err'))}"
    note = f" ({p['note']})" if p.get("note") else ""
    return f"fails parity: {errs}{note}"


def flatten(data: dict, prefix: str = "") -> dict:
    """Nested dicts become dotted columns; lists become JSON text (one cell); non-finite floats stay floats."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + ".") if value else {name: None})
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, default=_json_default)
        else:
            out[name] = value
    return out


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return str(x)
