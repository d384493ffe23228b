"""Error attribution: which hand-off's rounding costs the most accuracy.

A run rounds every sync payload to its transfer type and keeps the state in its own type. To see what
each rounding costs, `attribute` reruns the program with ONE hand-off rounded to the type the policy gives
it and everything else exact (the compute type, fp32), and measures the output's and the final state's
relative RMS error against the fp64 recurrence on the same inputs (q, k, v as stored in GM). It does this
for every payload, for every sync as a whole, for the state hand-off, and for narrow Cube accumulation if
the policy asks for it. Items are ranked by their parity-relevant error, max(output, final state); inf/NaN
(an overflow on its own) ranks first.

Rounding errors of independent hand-offs add roughly in quadrature, so the ranking also says where a
precision policy should spend bytes: `find_policy` gives the worst hand-offs a finer type, one at a time
(fp16 where the tensor's range allows it, which costs no bytes under bf16 transfers; else fp32), until the
run meets a target, then undoes every change the target does not need.

    python -m kda.attribution --version v3 --dtype bf16 --target 0.0025
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from npusim import Precision
from npusim.model.schedule import single_pass
from npusim.record.graph import PhaseGraph
from npusim.record.precision import dtype_name, itemsize

from kda.driver.execute import Execution, Types, execute
from kda.reference.parity import compare

STATE = "state"
ACCUMULATION = "accumulation"


@dataclass(frozen=True)
class Item:
    """One hand-off (or the accumulation) rounded alone."""
    name: str                 # payload tensor, "state", "accumulation", or "sync ②" for a whole sync
    where: str                # "sync ①", "state hand-off", "Cube matmuls"
    dtype: str                # the type it is rounded to
    nbytes: int               # bytes per chunk and sequence at that type
    o_err: float              # output rel RMS error with only this item rounded (inf: overflow)
    state_err: float          # final state rel RMS error
    overflow: str | None = None

    @property
    def err(self) -> float:
        return max(self.o_err, self.state_err)

    def to_dict(self) -> dict:
        def f(x):
            return x if math.isfinite(x) else None
        return {"name": self.name, "where": self.where, "dtype": self.dtype, "bytes": self.nbytes,
                "o_rel_rms_err": f(self.o_err), "state_rel_rms_err": f(self.state_err), "overflow": self.overflow}


@dataclass
class Attribution:
    exact: Item                          # nothing rounded: the compute type everywhere
    full: Item                           # the policy as run: everything rounded
    payloads: list[Item]                 # one payload (or the state, or the accumulation) at a time, ranked
    syncs: list[Item] = field(default_factory=list)   # one whole sync at a time, ranked

    @property
    def ranking(self) -> list[str]:
        return [i.name for i in self.payloads]

    @property
    def quadrature(self) -> float:
        """sqrt(sum of squares) of the single-item output errors above the exact run's: what independent
        roundings would add up to, to compare with the full run."""
        base = self.exact.o_err
        return math.sqrt(sum(max(i.o_err ** 2 - base ** 2, 0.0) for i in self.payloads))

    def to_dict(self) -> dict:
        return {"exact": self.exact.to_dict(), "full": self.full.to_dict(),
                "payloads": [i.to_dict() for i in self.payloads], "syncs": [i.to_dict() for i in self.syncs],
                "quadrature_o_rel_rms_err": self.quadrature if math.isfinite(self.quadrature) else None}


def rounded_items(graph: PhaseGraph, precision: Precision) -> list[tuple[str, str, str, int]]:
    """(name, where, type, bytes) of every hand-off the policy rounds below the compute type."""
    exact = precision.compute.itemsize
    items = []
    for s in graph.syncs:
        for p in s.payload:
            if not p.redundant and itemsize(p.dtype) < exact:
                items.append((p.name, f"sync {s.label}", p.dtype, p.nbytes))
    if graph.state is not None and itemsize(precision.state_type) < exact:
        items.append((STATE, "state hand-off", precision.state_type, graph.state.nbytes))
    if precision.accumulate is not None and itemsize(precision.accumulate) < exact:
        items.append((ACCUMULATION, "Cube matmuls", precision.accumulate, 0))
    return items


def _exact(precision: Precision) -> Precision:
    exact = dtype_name(precision.compute)
    return Precision(exact, {}, state=exact, compute=precision.compute)


def _only(precision: Precision, names: dict[str, str], state: str | None = None,
          accumulate: str | None = None) -> Precision:
    return replace(_exact(precision), overrides=dict(names), state=state or dtype_name(precision.compute),
                   accumulate=accumulate)


def _measure(name, where, dtype, nbytes, ex: Execution, ref_o, ref_state) -> Item:
    o, final_state = ex.computed()
    po, ps = compare(ref_o, o), compare(ref_state, final_state)
    nf = ex.nonfinite
    return Item(name, where, dtype, nbytes, po.rel_rms_err if po.finite else math.inf,
                ps.rel_rms_err if ps.finite else math.inf, str(nf) if nf else None)


def _rank(items: list[Item]) -> list[Item]:
    """Worst first; among equal errors (inf), one that overflows on its own first. A payload can hold inf
    where the program masks it away (v3's A_qk_raw above the diagonal): its error decides its rank."""
    return sorted(items, key=lambda i: (-i.err if math.isfinite(i.err) else -math.inf, i.overflow is None))


def attribute(execution: Execution, ref_o: torch.Tensor, ref_state: torch.Tensor, program,
              per_sync: bool = True) -> Attribution:
    """Rank the hand-offs of a finished run by what rounding each alone costs (see the module docstring).
    `ref_o`, `ref_state`: the fp64 recurrence on `execution.inputs_as_stored`."""
    pol = execution.precision
    q, k, v, g, beta, h0 = execution.inputs_as_stored
    def run(p):
        return execute(q, k, v, g, beta, None, h0, chunk_size=execution.chunk_size, types=Types(policy=p),
                       design=single_pass(program))
    def measure(name, where, dt, nb, p):
        return _measure(name, where, dt, nb, run(p), ref_o, ref_state)
    graph = execution.graph
    total = sum(graph.sync_bytes) + (graph.state.nbytes if graph.state else 0)
    full = _measure("all", "as run", pol.describe(), total, execution, ref_o, ref_state)
    exact = measure("none", "exact", dtype_name(pol.compute), 0, _exact(pol))
    items = []
    for name, where, dt, nb in rounded_items(graph, pol):
        if name == STATE:
            p = _only(pol, {}, state=dt)
        elif name == ACCUMULATION:
            p = _only(pol, {}, accumulate=dt)
        else:
            p = _only(pol, {name: dt})
        items.append(measure(name, where, dt, nb, p))
    syncs = []
    if per_sync:
        for s in graph.syncs:
            rounded = {p.name: p.dtype for p in s.payload if not p.redundant and itemsize(p.dtype) < pol.compute.itemsize}
            if len(rounded) > 1:
                types = "/".join(sorted(set(rounded.values())))
                syncs.append(measure(f"sync {s.label}", ", ".join(rounded), types,
                                     sum(p.nbytes for p in s.payload if p.name in rounded), _only(pol, rounded)))
    return Attribution(exact, full, _rank(items), _rank(syncs))


# ----- a policy that meets a target ----------------------------------------------------------------------
@dataclass
class PolicyStep:
    change: str                   # "M=fp16", "K_div=fp32", "pruned: ..." ("" for the starting policy)
    err: float                    # max(output, final state) rel RMS error of the full run
    o_err: float
    state_err: float
    nbytes: int                   # sync bytes + state bytes per chunk and sequence
    overflow: str | None = None


@dataclass
class PolicySearch:
    base: Precision
    policy: Precision
    steps: list[PolicyStep]       # the greedy changes in order, then the pruned result last
    target: float
    met: bool

    @property
    def extra_bytes(self) -> int:
        return self.steps[-1].nbytes - self.steps[0].nbytes


def bytes_per_chunk(graph: PhaseGraph) -> int:
    return sum(graph.sync_bytes) + (graph.state.nbytes if graph.state else 0)


def _apply(base: Precision, types: dict[str, str]) -> Precision:
    over, state = dict(base.overrides), base.state
    for name, dt in types.items():
        if name == STATE:
            state = dt
        else:
            over[name] = dt
    return replace(base, overrides=over, state=state)


def find_policy(inputs, program, base: Precision, target: float, chunk_size: int = 64,
                ref=None, fp32_only: bool = False) -> PolicySearch:
    """Greedy on the attribution ranking: give the worst hand-off the cheapest type that lowers the error
    without inf/NaN (first the other 2-byte type, which costs no bytes: fp16 for a well-scaled tensor
    under bf16 transfers, 8x finer; then fp32), until max(output, state) rel RMS <= target; then undo or
    cheapen every change the target does not need. `fp32_only`: fp32 is the only finer type tried."""
    x = inputs
    def run(types):
        return execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, chunk_size=chunk_size,
                       types=Types(policy=_apply(base, types)), design=single_pass(program))
    first = run({})
    if ref is None:
        from kda.studies.oracle import reference
        ref = reference(first)

    def step(change, ex):
        po, ps = compare(ref.o, ex.o), compare(ref.state, ex.final_state)
        o = po.rel_rms_err if po.finite else math.inf
        st = ps.rel_rms_err if ps.finite else math.inf
        nf = ex.nonfinite
        return PolicyStep(change, max(o, st), o, st, bytes_per_chunk(ex.graph), str(nf) if nf else None)

    def ok(st: PolicyStep) -> bool:
        return st.overflow is None and st.err <= target

    steps = [step("", first)]
    narrow = [] if fp32_only else [t for t in ("bf16", "fp16")
                                   if t != base.transfer and itemsize(t) == itemsize(base.transfer)]
    order = [i for i in attribute(first, ref.o, ref.state, program, per_sync=False).payloads
             if i.name != ACCUMULATION]
    types: dict[str, str] = {}
    for item in order:
        if ok(steps[-1]):
            break
        for dt in [*narrow, "fp32"]:
            if itemsize(dt) < itemsize(item.dtype) or dt == item.dtype:
                continue
            trial = step(f"{item.name}={dt}", run({**types, item.name: dt}))
            if trial.overflow is None and trial.err < steps[-1].err:
                types[item.name] = dt
                steps.append(trial)
                break
    met = ok(steps[-1])
    if met:      # prune: undo, or narrow, each change the target does not need
        for name in list(types):
            for cheaper in [None, *[t for t in narrow if types[name] == "fp32"]]:
                trial = {k: v for k, v in types.items() if k != name}
                if cheaper is not None:
                    trial[name] = cheaper
                if ok(step("", run(trial))):
                    types = trial
                    break
        final = step("pruned: " + ", ".join(f"{k}={v}" for k, v in types.items()), run(types))
        steps.append(final)
    return PolicySearch(base, _apply(base, types), steps, target, met)


# ----- command line --------------------------------------------------------------------------------------
@contextmanager
def one_thread():
    """Per-sequence tensors are at most [64, 128]: more torch threads add nothing, and on a busy machine
    their spin-waiting made `python -m kda.stability` 20x slower (13 s with one thread, 4.5 min with two)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def sci(x: float) -> str:
    return f"{x:.2e}" if math.isfinite(x) else "inf/NaN"


def attribution_table(a: Attribution, title: str = ""):
    """A rich table of the ranking (used by kda.views.render and the command line)."""
    from rich import box
    from rich.table import Table
    t = Table(title=f"Error attribution{': ' + title if title else ''} (one hand-off rounded, the rest "
                    f"{a.exact.dtype}; ranked by max(output, state) rel RMS)", box=box.SIMPLE_HEAD,
              title_justify="left")
    for col in ("rank", "rounded alone", "where", "type", "KiB", "output", "final state", "overflow"):
        t.add_column(col, justify="right" if col in ("rank", "KiB", "output", "final state") else "left")
    t.add_row("", "nothing (exact)", "", a.exact.dtype, "", sci(a.exact.o_err), sci(a.exact.state_err), "")
    for n, i in enumerate(a.payloads, 1):
        t.add_row(str(n), i.name, i.where, i.dtype, f"{i.nbytes / 1024:g}", sci(i.o_err), sci(i.state_err),
                  i.overflow or "")
    for i in a.syncs:
        t.add_row("", i.name + " whole", i.where, i.dtype, f"{i.nbytes / 1024:g}", sci(i.o_err), sci(i.state_err),
                  i.overflow or "")
    t.add_row("", "everything (as run)", "", "", f"{a.full.nbytes / 1024:g}", sci(a.full.o_err),
              sci(a.full.state_err), a.full.overflow or "", end_section=True)
    t.add_row("", "quadrature sum", "", "", "", sci(a.quadrature), "", "")
    return t
