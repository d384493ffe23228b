"""python -m kda.stability: where each phase program breaks numerically.

1. The grid version x transfer type x gate family: pass / fail (FLA metric, 0.005) / overflow (inf/NaN,
   with the first phase or sync and tensor), and the output's and final state's relative RMS error.
   Each program runs under its default policy (v4 keeps its state in fp32, see kda/programs/v4.py).
2. Failure thresholds in nats per chunk: with a constant log decay -N/C per token and channel (N nats per
   chunk), the smallest N at which a version first overflows or fails parity, found by a scan over
   N = 0.5, 1, 2, ... and bisection of the first failing interval (to 0.01 nats).

Shapes: the grid runs 16 chunks of 64 tokens, one sequence, d_k = d_v = 128 (16 chunks is what the slow
gates need for the state's error to build up; the other families erase the state within a chunk). The
thresholds run 2 chunks: the overflow happens inside the first chunk, and the threshold depends on the
chunk size (C = 64) and, for fp16, on d_k through the size of the normalised keys' entries.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch

from npusim import Precision

from kda.driver.execute import Execution
from kda.driver.inputs import GATES, KdaInputs
from kda.programs import PROGRAMS
from kda.reference.parity import RATIO
from kda.settings import Settings
from kda.settings.inputs import make_settings_inputs
from kda.studies.evaluate import evaluate
from kda.studies.oracle import Reference, reference

TRANSFERS = ("fp32", "bf16", "fp16")
PASS, FAIL, OVERFLOW = "pass", "fail", "overflow"
GRID_SETTINGS = Settings(chunks=16, heads=1, batch=1, chunk_size=64, d_k=128, d_v=128)
THRESHOLD_SETTINGS = Settings(chunks=2, heads=1, batch=1, chunk_size=64, d_k=128, d_v=128)
SCAN_MAX_NATS = 4096.0


@dataclass(frozen=True)
class Cell:
    version: str
    dtype: str
    gates: str
    status: str                   # pass, fail, overflow
    o_err: float | None           # None where inf/NaN
    state_err: float | None
    where: str | None = None      # first inf/NaN: "K_div in sync ① (fp16) of chunk 0 (sequence 0)"
    policy: str = ""

    @property
    def err(self) -> float:
        if self.o_err is None or self.state_err is None:
            return math.inf
        return max(self.o_err, self.state_err)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def classify(r) -> tuple[str, str | None]:
    nf = r.execution.nonfinite
    if nf is not None and not (r.parity_o.finite and r.parity_state.finite):
        return OVERFLOW, str(nf)
    if nf is not None:            # inf in a payload that the program masks away; results finite
        return (PASS if r.passed else FAIL), str(nf)
    return (PASS if r.passed else FAIL), None


def run_cell(version: str, dtype: str, gates: str, base: Settings = GRID_SETTINGS,
             inputs: KdaInputs | None = None, ref: Reference | None = None) -> Cell:
    s = replace(base, dtype=dtype, gates=gates)
    r = evaluate(version, s, inputs, ref, timing=False)
    status, where = classify(r)
    po, ps = r.parities()
    return Cell(version, dtype, gates, status, _finite(po.rel_rms_err), _finite(ps.rel_rms_err),
                where, r.execution.precision.describe())


def grid(versions=None, dtypes=TRANSFERS, gates=GATES, base: Settings = GRID_SETTINGS) -> list[Cell]:
    versions = list(versions or PROGRAMS)
    cells = []
    for gate in gates:
        x = make_settings_inputs(replace(base, gates=gate))     # the same inputs for every version and type
        for dt in dtypes:
            ref = shared_reference(x, dt, base.chunk_size)     # one fp64 recurrence serves every version
            for v in versions:
                cells.append(run_cell(v, dt, gate, base, x, ref))
    cells.sort(key=lambda c: (versions.index(c.version), dtypes.index(c.dtype), gates.index(c.gates)))
    return cells


def shared_reference(x: KdaInputs, dtype: str, chunk_size: int) -> Reference:
    """The fp64 recurrence on the inputs as GM holds them under `dtype` transfers: what every version's
    run is compared with (evaluate recomputes it where a policy stores the inputs differently)."""
    ex = Execution(o=None, final_state=None, graph=None, nonfinite=None, precision=Precision(dtype), chunks=0,
                   chunk_size=chunk_size, inputs=(x.q, x.k, x.v, x.g, x.beta, x.initial_state))
    return reference(ex)


# ----- thresholds -------------------------------------------------------------------------------------
def constant_decay_inputs(nats_per_chunk: float, base: Settings = THRESHOLD_SETTINGS) -> KdaInputs:
    """The base inputs with g = -N/C for every token and channel: N nats of decay per chunk."""
    x = make_settings_inputs(base)
    return replace(x, g=torch.full_like(x.g, -nats_per_chunk / base.chunk_size))


def probe(version: str, dtype: str, nats_per_chunk: float, base: Settings = THRESHOLD_SETTINGS) -> Cell:
    s = replace(base, dtype=dtype, gates="seed")
    x = constant_decay_inputs(nats_per_chunk, base)
    r = evaluate(version, s, x, timing=False)
    status, where = classify(r)
    po, ps = r.parities()
    return Cell(version, dtype, f"{nats_per_chunk:g} nats/chunk", status, _finite(po.rel_rms_err),
                _finite(ps.rel_rms_err), where, r.execution.precision.describe())


_probe_cached = functools.lru_cache(maxsize=4096)(probe)     # the fail and overflow searches share probes


@dataclass(frozen=True)
class Threshold:
    version: str
    dtype: str
    kind: str                     # what counts as failing: "fail" (overflow or parity) or "overflow"
    nats: float | None            # smallest failing N (within tol); None: no failure up to max_nats
    last_pass: float | None       # largest N known to pass below it
    status: str | None            # how it fails there: fail or overflow
    where: str | None             # first inf/NaN there
    max_nats: float
    probes: int                   # evaluations spent


def threshold(version: str, dtype: str, base: Settings = THRESHOLD_SETTINGS, tol: float = 0.01,
              max_nats: float = SCAN_MAX_NATS, kind: str = FAIL) -> Threshold:
    """Smallest N (nats per chunk) where `version` first fails (kind="fail": overflow or parity) or first
    overflows (kind="overflow"): scan 0.5, 1, 2, ... then bisect the first failing interval. Scanning
    first keeps the answer the FIRST failure even where the outcome is not monotone in N."""
    count = 0
    def bad(n):
        nonlocal count
        count += 1
        c = _probe_cached(version, dtype, n, base)
        failed = c.status != PASS if kind == FAIL else c.status == OVERFLOW
        return c if failed else None
    lo, n = 0.0, 0.5
    hit = None
    while n <= max_nats:
        hit = bad(n)
        if hit is not None:
            break
        lo, n = n, n * 2
    if hit is None:
        return Threshold(version, dtype, kind, None, lo, None, None, max_nats, count)
    hi = n
    while hi - lo > tol:
        mid = (lo + hi) / 2
        c = bad(mid)
        if c is None:
            lo = mid
        else:
            hi, hit = mid, c
    return Threshold(version, dtype, kind, hi, lo, hit.status, hit.where, max_nats, count)


def thresholds(versions=("v3", "v4"), dtypes=TRANSFERS, base: Settings = THRESHOLD_SETTINGS) -> list[Threshold]:
    """First failure and first overflow of each version and transfer type."""
    return [threshold(v, dt, base, kind=k) for v in versions for dt in dtypes for k in (FAIL, OVERFLOW)]


# ----- printing ---------------------------------------------------------------------------------------
def _cell_text(c: Cell):
    from rich.text import Text
    if c.status == OVERFLOW:
        return Text(f"overflow\n{_short(c.where)}", style="bold magenta")
    style = "green" if c.status == PASS else "bold red"
    return Text(f"{c.status} {c.err:.1e}", style=style)


def _short(where: str | None) -> str:
    """'K_div in sync ① (fp16) of chunk 0 (sequence 0)' -> 'K_div, sync ①'."""
    if not where:
        return ""
    tensor, _, rest = where.partition(" in ")
    place = rest.split(" of chunk")[0].replace(" (fp16)", "").replace(" (bf16)", "").replace(" (fp32)", "")
    return f"{tensor}, {place}"


def grid_table(cells: list[Cell], chunks: int):
    from rich import box
    from rich.table import Table
    gates = list(dict.fromkeys(c.gates for c in cells))
    t = Table(title=f"Stability grid: max(output, final state) rel RMS error over {chunks} chunks of 64, "
                    f"d_k = d_v = 128 (FLA metric: pass < {RATIO})", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("version")
    t.add_column("transfer")
    for g in gates:
        t.add_column(g, justify="left")
    t.add_column("policy", style="dim")
    rows = list(dict.fromkeys((c.version, c.dtype) for c in cells))
    by = {(c.version, c.dtype, c.gates): c for c in cells}
    for i, (v, dt) in enumerate(rows):
        last = i + 1 == len(rows) or rows[i + 1][0] != v
        t.add_row(v, dt, *[_cell_text(by[v, dt, g]) for g in gates], by[v, dt, gates[0]].policy,
                  end_section=last)
    return t


def threshold_table(ths: list[Threshold]):
    from rich import box
    from rich.table import Table
    t = Table(title="Failure threshold: constant log decay, N nats per 64-token chunk (scan, then bisection "
                    "to 0.01 nats)", box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("version", "transfer", "first failure at N", "how", "first overflow at N", "where"):
        t.add_column(col, justify="right" if col.endswith("at N") else "left")
    def at(th):
        return f"none up to {th.max_nats:g}" if th.nats is None else f"{th.nats:.2f}"
    pairs: dict[tuple[str, str], dict[str, Threshold]] = {}
    for th in ths:
        pairs.setdefault((th.version, th.dtype), {})[th.kind] = th
    for (v, dt), ks in pairs.items():
        f, o = ks.get(FAIL), ks.get(OVERFLOW)
        t.add_row(v, dt, at(f) if f else "", (f.status or "") if f else "", at(o) if o else "",
                  _short(o.where) if o else "")
    return t
