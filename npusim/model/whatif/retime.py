"""Re-timing a recorded replay for many profiles at once, instead of replaying it once per profile.

A replay (engine.py, `simulate(..., record=True)`) decides, event by event, which ready node a unit or link
starts next, how many transfers each transfer shares its chip-wide bandwidth with, and which release grants
each chunk its slot. Under another profile the durations change; where those decisions stay the same, the
times follow from the recorded order alone: a max-plus pass over the events (maxplus.py), vectorised over
the samples. `Schedule` is a recorded replay compiled for that pass: every event, what it waits for, its unit
or link, its bandwidth and what it must keep to stay in the recorded order.

The pass is checked against the replay on the nominal profile itself (the same makespan to the last bit,
every decision reproduced, every transfer's count of others under way); a schedule that fails that check
says why (`Schedule.problem`) and its samples are replayed. So does any sample that would change a decision:
`retime` returns which samples it accepted, and the caller replays the others with the event model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from npusim.chip.lanes import lanes_of
from npusim.chip.profile import Profile
from npusim.model.engine import HBM, L2, Run, Template, core_order
from npusim.model.template import shared_rate
from npusim.model.whatif.maxplus import learn, previous_greater, retime_blocks

SHARED = (HBM, L2)


@dataclass
class Schedule:
    """A recorded replay compiled for the max-plus pass (maxplus.py's arguments, by name)."""
    run: Run
    serial: bool
    events: dict[str, np.ndarray]
    n_srv: int
    resources: list[str]                  # a core's units and links, as the engine sorts them
    problem: str | None = None            # why it cannot be re-timed (its samples are replayed)

    @property
    def size(self) -> int:
        return len(self.events["ev_node"])


@dataclass
class Timing:
    """Per sample: the makespan, whether the recorded order held (False: replay it), busy time per
    (simulated core, unit or link)."""
    makespan_us: np.ndarray
    ok: np.ndarray
    busy_us: np.ndarray                   # [simulated cores x resources, samples]
    passes: np.ndarray                    # passes each sample's block took to settle its bandwidth shares
    reasons: np.ndarray                   # why a sample was not accepted (maxplus.REASONS' bits)


def _csr(pairs_succ: np.ndarray, pairs_pred: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((pairs_pred, pairs_succ))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(pairs_succ, minlength=n), out=ptr[1:])
    return ptr, pairs_pred[order].astype(np.int64)


def _previous(group: np.ndarray, where: np.ndarray) -> np.ndarray:
    """For each event, the previous event (in start order) of the same group among those `where` holds."""
    out = np.full(len(group), -1, np.int64)
    idx = np.flatnonzero(where)
    order = idx[np.argsort(group[idx], kind="stable")]
    same = group[order[1:]] == group[order[:-1]]
    out[order[1:][same]] = order[:-1][same]
    return out


def compile_schedule(run: Run) -> Schedule:
    """The recorded replay `run` (simulate(..., record=True)) as a Schedule."""
    rec = _Recorded(run)
    edges = _Edges()
    problem = None
    for r, (c, seqs, copies) in enumerate(rec.cores):
        problem = _core_edges(run, rec, edges, rank=r, core=c, seqs=seqs, copies=copies)
        if problem is not None:
            break
    ev = _event_arrays(run, rec, edges)
    sched = Schedule(run, run.serial, ev, len(rec.cores) * len(rec.resources), rec.resources, problem)
    if problem is None:
        _learn(sched)
    return sched


class _Recorded:
    """The recorded starts of a replay, per event (in start order): its core's rank, node, instance and the
    transfers under way when it started; each event's first-chunk flag and copies (filled per core)."""

    def __init__(self, run: Run):
        log, tpl = run.log, run.template
        if log is None:
            raise ValueError("the run was not recorded (simulate(..., record=True))")
        self.cores = log.cores
        self.resources = sorted({x.resource for x in tpl.nodes})
        res_index = {r: i for i, r in enumerate(self.resources)}
        self.node_res = np.array([res_index[x.resource] for x in tpl.nodes], np.int64)
        starts = np.frombuffer(log.starts, np.int64).reshape(-1, 3)
        self.rank_of = {c: r for r, (c, _, _) in enumerate(log.cores)}
        lookup = np.full(max(self.rank_of) + 1, -1, np.int64)
        for c, r in self.rank_of.items():
            lookup[c] = r
        self.ev_rank = lookup[starts[:, 0]]
        self.nid = starts[:, 1]
        self.ev_node, self.ev_inst, self.ev_act = self.nid % tpl.n, self.nid // tpl.n, starts[:, 2]
        self.ev_first = np.zeros(len(self.nid), np.uint8)
        self.ev_m = np.zeros(len(self.nid), np.int64)
        self.grants_of: dict[int, list[int]] = {}
        for c, j in np.frombuffer(log.grants, np.int64).reshape(-1, 2).tolist():
            self.grants_of.setdefault(self.rank_of[c], []).append(j)


class _Edges:
    """The dependencies between events (succ waits for pred), and the slot releases in order."""

    def __init__(self):
        self.succ: list[np.ndarray] = []
        self.pred: list[np.ndarray] = []
        self.trig_a: list[np.ndarray] = []
        self.trig_b: list[np.ndarray] = []

    def add(self, succ: np.ndarray, pred: np.ndarray) -> None:
        self.succ.append(succ)
        self.pred.append(pred)


def _core_edges(run: Run, rec: _Recorded, edges: _Edges, *, rank: int, core: int, seqs, copies: int) -> str | None:
    """One core's events: their flags, and the edges between them (the template's, across chunks by the
    state and write-after-read edges, and the slot grants). A problem with the recording, or None."""
    tpl, n = run.template, run.template.n
    order = core_order(seqs, run.chunk_counts, run.interleave)
    n_inst = len(order)
    mine = np.flatnonzero(rec.ev_rank == rank)
    eid = np.full(n_inst * n, -1, np.int64)
    eid[rec.nid[mine]] = mine
    if len(mine) != n_inst * n or (eid < 0).any():
        return f"core {core}: the recorded replay did not start every node once"
    first = np.array([t == 0 for _, t, _ in order], np.uint8)
    rec.ev_first[mine] = first[rec.ev_inst[mine]]
    rec.ev_m[mine] = copies
    grid = eid.reshape(n_inst, n)
    if run.serial:
        edges.add(mine[1:], mine[:-1])
        return None
    prev_state, prev_war = _previous_instances(order)
    for node in tpl.nodes:
        for d in node.deps:
            edges.add(grid[:, node.index], grid[:, d])
    for pairs, prev in ((tpl.state_edges, prev_state), (tpl.war_edges, prev_war)):
        has = np.flatnonzero(prev >= 0)
        for a, b in pairs:
            edges.add(grid[has, b], grid[prev[has], a])
    if tpl.slot_release is None:
        return None
    slots = run.profile.workspace.slots * min(run.interleave, len(seqs))
    released = np.array(rec.grants_of.get(rank, []), np.int64)
    granted = slots + np.arange(len(released))
    if len(released) != max(0, n_inst - slots) or (granted >= n_inst).any():
        return f"core {core}: the recorded slot grants do not match its chunks"
    trig = grid[released, tpl.slot_release]
    edges.add(grid[granted, 0], trig)
    edges.trig_a.append(trig[:-1])
    edges.trig_b.append(trig[1:])
    return None


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _event_arrays(run: Run, rec: _Recorded, edges: _Edges) -> dict[str, np.ndarray]:
    """The Schedule's per-event arrays: the recording's, the dependencies (CSR), each unit's previous event
    and the transfers' order on each chip-wide bandwidth; the ties and windows _learn fills in."""
    tpl, n_ev = run.template, len(rec.nid)
    ev: dict[str, np.ndarray] = {"ev_node": rec.ev_node, "ev_first": rec.ev_first, "ev_m": rec.ev_m,
                                 "ev_act": rec.ev_act}
    srv = rec.ev_rank * len(rec.resources) + rec.node_res[rec.ev_node]
    ev["ev_srv"] = srv
    ev["pred_ptr"], ev["pred_idx"] = _csr(_joined(edges.succ), _joined(edges.pred), n_ev)
    if run.serial:
        ev["srv_prev"] = np.full(n_ev, -1, np.int64)
        ev["jstar"] = np.full(n_ev, -1, np.int64)
    else:
        ev["srv_prev"] = _previous(srv, np.ones(n_ev, bool))
        ev["jstar"] = previous_greater(rec.nid, srv)
    shared = np.array([SHARED.index(x.shared) if x.shared in SHARED else -1 for x in tpl.nodes], np.int64)
    ev["ev_res"] = np.where(rec.ev_act >= 0, shared[rec.ev_node], -1)
    on_res = [np.flatnonzero(ev["ev_res"] == r) for r in range(len(SHARED))]
    ev["seq"] = np.concatenate(on_res).astype(np.int64)
    ev["seq_off"] = np.concatenate([[0], np.cumsum([len(x) for x in on_res])]).astype(np.int64)
    ev["tpos"] = np.zeros(n_ev, np.int64)
    for x in on_res:
        ev["tpos"][x] = np.arange(len(x))
    ev["trig_a"], ev["trig_b"] = _joined(edges.trig_a), _joined(edges.trig_b)
    ev.update(tie_a=np.zeros(n_ev, np.bool_), tie_idle=np.zeros(n_ev, np.bool_),
              tie_last=np.full(n_ev, -1, np.int64), wlo=np.zeros(n_ev, np.int64), whi=np.zeros(n_ev, np.int64),
              wsum=np.zeros(n_ev, np.int64), s_nom=np.zeros(n_ev))
    return ev


def _previous_instances(order) -> tuple[np.ndarray, np.ndarray]:
    """Per instance of a core: the same sequence's previous chunk (state) and the lane's previous instance
    (write-after-read), -1 where none (engine._Core's next_state / next_war, reversed)."""
    prev_state = np.full(len(order), -1, np.int64)
    prev_war = np.full(len(order), -1, np.int64)
    last_seq: dict[int, int] = {}
    last_lane: dict[int, int] = {}
    for i, (s, _, lane) in enumerate(order):
        if s in last_seq:
            prev_state[i] = last_seq[s]
        if lane in last_lane:
            prev_war[i] = last_lane[lane]
        last_seq[s], last_lane[lane] = i, i
    return prev_state, prev_war


@dataclass
class Params:
    """Each node's durations over the samples (maxplus.py's arguments, by name)."""
    arrays: dict[str, np.ndarray]
    n: int


def node_params(tpl: Template, profile: Profile, serial: bool, n: int) -> Params:
    """The durations the engine gives each node of `tpl` on `profile` (a stacked profile: n samples)."""
    k = tpl.n
    a: dict[str, np.ndarray] = {name: np.zeros((k, n)) for name in ("busy_f", "busy_l", "delay_f", "delay_l", "work", "p_load", "p_comp", "p_store",
                                "p_io")}
    a["bytes_f"], a["bytes_l"] = np.zeros(k, np.int64), np.zeros(k, np.int64)
    a["res"], a["pipe"], a["p_tiles"] = np.zeros(k, np.int64), np.zeros(k, np.bool_), np.zeros(k, np.int64)
    a["res_on"] = np.zeros(k, np.bool_)
    for i, x in enumerate(tpl.nodes):
        pipe = x.pipe
        busy = pipe.busy_us(serial=True) if pipe is not None and serial else x.busy_us
        a["busy_f"][i] = lanes_of(x.busy_first_us if pipe is None else busy, n)
        a["busy_l"][i] = lanes_of(busy, n)
        a["delay_f"][i], a["delay_l"][i] = lanes_of(x.delay_first_us, n), lanes_of(x.delay_us, n)
        a["work"][i] = lanes_of(x.work_us, n)
        a["bytes_f"][i], a["bytes_l"][i] = _count(x.nbytes_first), _count(x.nbytes)
        a["res"][i] = SHARED.index(x.shared) if x.shared in SHARED else 0
        a["res_on"][i] = x.shared in SHARED and math.isfinite(_rate_of(profile, x.shared))
        if pipe is not None and pipe.overlaps and not serial:
            a["pipe"][i] = True
            a["p_tiles"][i] = pipe.tiles
            for key, value in (("p_load", pipe.load_us), ("p_comp", pipe.compute_us), ("p_store", pipe.store_us),
                               ("p_io", pipe.io_us)):
                a[key][i] = lanes_of(value, n)
    a["rate"] = np.stack([lanes_of(shared_rate(profile, r), n) for r in SHARED])
    return Params(a, n)


def _rate_of(profile: Profile, shared: str) -> float:
    """A chip-wide rate that is the same in every lane (finite or not: whether the engine models the
    bandwidth at all shapes the schedule)."""
    rate = lanes_of(shared_rate(profile, shared), 1) if not isinstance(shared_rate(profile, shared), np.ndarray) \
        else shared_rate(profile, shared)
    finite = np.isfinite(np.asarray(rate, dtype=float))
    if finite.any() and not finite.all():
        raise TypeError(f"the {shared} bandwidth is infinite in some samples only")
    return float(np.asarray(rate, dtype=float).flat[0])


def _count(x) -> int:
    if isinstance(x, np.ndarray):
        raise TypeError("a node's bytes vary with the sampled fields")
    return int(x)


def _learn(sched: Schedule) -> None:
    """Time the nominal profile with the recorded counts and record its ties; find each transfer's window
    (the recorded transfers on its bandwidth that can be under way when it starts); check that re-timing the
    nominal profile gives the replay's makespan to the last bit; on a mismatch, set `problem`."""
    run, ev = sched.run, sched.events
    params = node_params(run.template, run.profile, sched.serial, 1)
    n_ev = sched.size
    times = np.zeros((n_ev, 2))
    good, span = learn(sched.serial, *(ev[k] for k in _LEARN_ARGS), *(params.arrays[k] for k in _PARAM_ARGS),
                       sched.n_srv, times)
    if not good or span != run.makespan_us:
        sched.problem = (f"re-timing the recorded replay gives {span!r} us against its {run.makespan_us!r} us"
                         if good else "the recorded replay's order is not one the re-timing reproduces")
        return
    ev["s_nom"] = times[:, 0].copy()
    m = ev["ev_m"]
    for r in range(len(SHARED)):
        seq = ev["seq"][ev["seq_off"][r]:ev["seq_off"][r + 1]]
        if len(seq) == 0:
            continue
        at, end = times[seq, 0], times[seq, 1]
        if (np.diff(at) < 0).any():
            sched.problem = "the recorded transfers did not start in time order"
            return
        pos = np.arange(len(seq))
        h = np.maximum(np.searchsorted(at, end, side="left"), pos + 1)        # the first start that pops it
        under = np.zeros(len(seq) + 1, np.int64)
        np.add.at(under, pos + 1, m[seq])
        np.add.at(under, h, -m[seq])
        if not np.array_equal(np.cumsum(under)[:-1], ev["ev_act"][seq]):
            sched.problem = "the recorded bandwidth shares do not follow from the recorded times"
            return
        reach = int((h - 1 - pos).max())                    # positions a transfer stays under way for
        margin = WINDOW_MARGIN + reach // 4
        lo = np.maximum(pos - reach - margin, 0)
        hi = np.minimum(pos + margin, len(seq) - 1)
        csum = np.concatenate([[0], np.cumsum(m[seq])])
        ev["wlo"][seq], ev["whi"][seq] = lo, hi
        ev["wsum"][seq] = csum[hi + 1] - csum[lo] - m[seq]
    check = retime(sched, params)
    if not check.ok[0] or check.makespan_us[0] != run.makespan_us:
        sched.problem = (f"re-timing the nominal profile gives {check.makespan_us[0]!r} us against the replay's "
                         f"{run.makespan_us!r} us" if check.ok[0] else
                         "re-timing does not reproduce the nominal replay's decisions")


WINDOW_MARGIN = 8      # recorded transfers before and after the farthest under way that a window also holds
_LEARN_ARGS = ("ev_node", "ev_first", "ev_m", "ev_act", "ev_srv", "pred_ptr", "pred_idx", "srv_prev", "jstar",
               "tie_a", "tie_idle", "tie_last", "ev_res", "tpos", "seq", "seq_off")
_EVENT_ARGS = ("ev_node", "ev_first", "ev_m", "ev_act", "ev_srv", "pred_ptr", "pred_idx", "srv_prev", "jstar",
               "tie_a", "tie_idle", "tie_last", "ev_res", "tpos", "wlo", "whi", "wsum", "seq", "seq_off", "s_nom",
               "trig_a", "trig_b")
_PARAM_ARGS = ("busy_f", "busy_l", "delay_f", "delay_l", "work", "bytes_f", "bytes_l", "res", "rate", "pipe",
               "p_load", "p_comp", "p_store", "p_tiles", "p_io")


def retime(sched: Schedule, params: Params) -> Timing:
    """The schedule's makespan for every sample of `params`, and which samples kept the recorded order."""
    n = params.n
    span, ok, busy = np.zeros(n), np.zeros(n, np.bool_), np.zeros((sched.n_srv, n))
    passes, reasons = np.zeros(n, np.int64), np.zeros(n, np.int64)
    if sched.problem is not None or n == 0:
        return Timing(span, ok, busy, passes, reasons)
    ev = sched.events
    retime_blocks(sched.serial, *(ev[k] for k in _EVENT_ARGS), *(params.arrays[k] for k in _PARAM_ARGS),
            sched.n_srv, span, ok, passes, reasons, busy)
    return Timing(span, ok, busy, passes, reasons)
