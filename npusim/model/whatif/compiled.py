"""The event model of engine.py, compiled (numba): the replay of one profile's sample at a time.

It makes the engine's decisions by the engine's rules and in its order: SimPy's queue of timeouts by
(time, order of scheduling), the units' and links' heaps of ready nodes (oldest first), the idle units
started once an event is handled (in the order their first ready node came; the unit just released first),
the slots granted chunk by chunk on each release, the chip-wide bandwidths with the transfers under way;
serial mode, each core's nodes one after the other. Its durations are engine.py's busy_time with the same
floating-point operations, so its makespan is the engine's to the last bit (tests hold it to that).

Speed. Each node's static facts (its template node, core, instance, whether it is a sequence's first chunk)
are packed in one integer; a timeout's key packs its order of scheduling with the node. The helpers of the
loops are inlined (inline="always") and each uses every array it takes on every path through it, and leaves
its loops without `break`: otherwise numba counts a reference to the array on every event, a cost many times
the event's own. The samples are shared among threads (threads.py).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from npusim.model.whatif.heaps import OPTS, epop, epush, hpop, hpush, qpop, qpush, qsift

SHIFT = 32                  # a timeout's key: (order of scheduling << SHIFT) | (node << 1) | (1: its completion)
LOW = (1 << SHIFT) - 1
K_BITS, R_BITS = 12, 11     # a node's info: (instance << 24) | (first chunk << 23) | (core << 12) | template node


@njit(inline="always", **OPTS)
def _ready(j, v, heap, srv_off, srv_size, running, pending, waiting, nwait):
    """Node j is ready: onto unit v's heap; an idle unit waits to start once the event is handled."""
    srv_size[v] = hpush(heap, srv_off[v], srv_size[v], j)
    idle = not (running[v] | pending[v])
    pending[v] |= idle
    waiting[nwait] = v                           # kept only if it was idle (room for it: one place spare)
    return nwait + idle


@njit(**OPTS)
def _first_ready(n, n_res, info, rank_base, rank_inst, node_srv, slot_release, remaining0, srv_off, free, next_grant,
                 remaining, heap, srv_size, running, pending, waiting):
    """A sample's start (engine._Core): every core's ready nodes, then its first slots granted, onto their
    units' heaps; the units to start in `waiting` (their number returned)."""
    remaining[:] = remaining0
    srv_size[:] = 0
    running[:] = False
    pending[:] = False
    nwait = 0
    for r in range(rank_base.shape[0]):
        lo, hi = rank_base[r], rank_base[r] + rank_inst[r] * n
        for ident in range(lo, hi):
            if remaining[ident] == 0:
                nwait = _ready(ident, r * n_res + node_srv[info[ident] & 0xFFF], heap, srv_off, srv_size, running,
                               pending, waiting, nwait)
        while slot_release >= 0 and free[r] > 0 and next_grant[r] < rank_inst[r]:
            free[r] -= 1
            j = lo + next_grant[r] * n
            next_grant[r] += 1
            remaining[j] -= 1
            if remaining[j] == 0:
                nwait = _ready(j, r * n_res + node_srv[0], heap, srv_off, srv_size, running, pending, waiting, nwait)
    return nwait


@njit(inline="always", **OPTS)
def busy_past_share(first, busy_f, busy_l, share, pipe, io, load, comp, store, tiles, work):
    """engine.py's busy_time past the share, from scalars: (the time the unit is held, the transfer's time)."""
    busy = busy_f if first else busy_l
    if pipe:
        t = io if io >= share else share
        if io > 0:
            st = t / io
            l_, c_, s_ = load * st, comp, store * st
            top = l_ if l_ >= c_ else c_
            top = top if top >= s_ else s_
            return l_ + c_ + s_ + (tiles - 1) * top, t
        return busy + t, t
    own = busy - work
    t = own if own >= share else share
    return work + t, t


@njit(inline="always", **OPTS)
def _timeout(qt, qk, qsize, hole, t, key):
    """A timeout onto SimPy's queue: into the place the popped top left (`hole`, sifted down from the root),
    else pushed; the queue's new size."""
    if hole:
        qsift(qt, qk, qsize, t, key)
        return qsize
    return qpush(qt, qk, qsize, t, key)


@njit(inline="always", **OPTS)
def _shared_busy(k, first, m, now, rr, nb, rate, bf, bl, wk, pipe, pl, pc, ps, pt, pio, et, em, moved, esize0, esize1,
                 active0, active1):
    """engine.busy_time of node k (its `m` copies, `nb` bytes) starting at `now` on chip-wide bandwidth rr:
    past its share with the transfers under way (each bandwidth's heap in et, em, by end; their sizes and
    multiplicities under way passed in and returned), its time on the bandwidth added to `moved` (_Share.busy):
    (the busy time, esize0, esize1, active0, active1)."""
    off = rr * (et.shape[0] // 2)
    sz = esize0 if rr == 0 else esize1
    act = active0 if rr == 0 else active1
    while sz > 0 and et[off] <= now:
        act -= epop(et, em, off, sz)
        sz -= 1
    busy, t = busy_past_share(first, bf[k], bl[k], nb * (act + m) / rate[rr], pipe[k], pio[k], pl[k], pc[k], ps[k],
                              pt[k], wk[k])
    sz = epush(et, em, off, sz, now + t, m)
    moved[rr] += m * nb / rate[rr]
    if rr == 0:
        return busy, sz, esize1, act + m, active1
    return busy, esize0, sz, active0, act + m


@njit(inline="always", **OPTS)
def _complete(ident, x, n, n_res, rank_base, rank_inst, next_state, next_war, succ_ptr, succ_kind, succ_node,
              node_srv, slot_release, free, next_grant, remaining, heap, srv_off, srv_size, running, pending,
              waiting, nwait):
    """engine.complete of node `ident` (its info x): its successors in its chunk, in the next chunk of the
    state and of the lane; a released slot granted to the core's next chunk. The units to start in `waiting`
    (their number returned)."""
    k = x & 0xFFF
    r = (x >> 12) & 0x7FF
    base = ident - k
    rb = rank_base[r]
    g = x >> 24
    nw = next_war[g]
    ns = next_state[g]
    grant = slot_release >= 0 and k == slot_release
    if grant:
        free[r] += 1
    q1 = succ_ptr[k + 1] + (1 if grant else 0)
    for q in range(succ_ptr[k], q1):
        if q < succ_ptr[k + 1]:
            kind = succ_kind[q]
            kk = succ_node[q]
            if kind == 0:
                j = base + kk
            elif kind == 1:
                if nw < 0:
                    continue
                j = rb + nw * n + kk
            else:
                if ns < 0:
                    continue
                j = rb + ns * n + kk
        else:                                    # the slot released (the last q): the next chunk granted one
            if next_grant[r] >= rank_inst[r]:
                continue
            free[r] -= 1
            j = rb + next_grant[r] * n
            next_grant[r] += 1
            kk = 0
        remaining[j] -= 1
        if remaining[j] == 0:
            nwait = _ready(j, r * n_res + node_srv[kk], heap, srv_off, srv_size, running, pending, waiting, nwait)
    return nwait


@njit(inline="always", **OPTS)
def _started(times, ident, now, busy, first_pass):
    """Where `times` has rows: node `ident` started at `now` for `busy`, before the first event or not."""
    if times.shape[0] > 0:
        times[ident, 0], times[ident, 1], times[ident, 4] = now, busy, first_pass


@njit(inline="always", **OPTS)
def _ended(times, ident, now, ndone):
    """Where `times` has rows: node `ident` done at `now`, the ndone-th to complete; the count done."""
    if times.shape[0] > 0:
        times[ident, 2], times[ident, 3] = now, ndone
        return ndone + 1
    return ndone


@njit(**OPTS)
def _pipelined(n, n_res, info, rank_base, rank_inst, rank_copies, rank_slots, next_state, next_war, remaining0,
               succ_ptr, succ_kind, succ_node, node_srv, slot_release, shared, srv_off, bf, bl, df, dl, wk, nbf, nbl,
               rate, pipe, pl, pc, ps, pt, pio, remaining, heap, srv_size, running, pending, waiting, qt, qk, et, em,
               held, moved, times):
    """One sample, pipelined (engine._Model): the makespan, NaN on a deadlock; each unit's busy time added to
    `held`, each chip-wide bandwidth's to `moved` (engine's server.busy and _Share.busy, in the same order);
    where `times` has rows, each node's start, busy time, end, place in the order of completion and whether it
    started before the first event (SimPy's clock still its initial integer 0)."""
    esize0, esize1, active0, active1 = 0, 0, 0, 0
    free = rank_slots.copy()
    next_grant = np.zeros(rank_base.shape[0], np.int64)
    qsize, seq, now, ndone = 0, 0, 0.0, 0
    nwait = _first_ready(n, n_res, info, rank_base, rank_inst, node_srv, slot_release, remaining0, srv_off, free,
                         next_grant, remaining, heap, srv_size, running, pending, waiting)
    lead = -1
    hole = False
    first_pass = True
    while True:
        if not first_pass:
            if hole:
                qsize = qpop(qt, qk, qsize)
            if qsize == 0:
                break
            now = qt[0]
            code = qk[0] & LOW
            hole = True                          # the top leaves the queue; the next timeout takes its place
            released = (code & 1) == 0
            ident = code >> 1
            x = info[ident]
            v = ((x >> 12) & 0x7FF) * n_res + node_srv[x & 0xFFF]
            done = True
            if released:                        # engine._released
                running[v] = False
                d = df[x & 0xFFF] if (x >> 23) & 1 else dl[x & 0xFFF]
                if d != 0.0:
                    qsize = _timeout(qt, qk, qsize, hole, now + d, (seq << SHIFT) | (code | 1))
                    hole = False
                    seq += 1
                    done = False
            if done:                             # engine.complete
                ndone = _ended(times, ident, now, ndone)
                nwait = _complete(ident, x, n, n_res, rank_base, rank_inst, next_state, next_war, succ_ptr,
                                  succ_kind, succ_node, node_srv, slot_release, free, next_grant, remaining, heap,
                                  srv_off, srv_size, running, pending, waiting, nwait)
            if released and srv_size[v] > 0 and not pending[v]:
                lead = v                         # it starts its next node at once, ahead of the waiting units
        j = -1 if lead >= 0 else 0
        while j < nwait:                         # flush: start every idle unit with ready nodes, in order
            if j < 0:
                v = lead
                lead = -1
            else:
                v = waiting[j]
                pending[v] = False
            j += 1
            if running[v] or srv_size[v] == 0:
                continue
            ident = hpop(heap, srv_off[v], srv_size[v])
            srv_size[v] -= 1
            x = info[ident]
            k, first = x & 0xFFF, (x >> 23) & 1
            busy = bf[k] if first else bl[k]     # engine.busy_time
            nb = nbf[k] if first else nbl[k]
            if shared[k] >= 0 and nb != 0:
                busy, esize0, esize1, active0, active1 = _shared_busy(
                    k, first, rank_copies[(x >> 12) & 0x7FF], now, shared[k], nb, rate, bf, bl, wk, pipe, pl, pc,
                    ps, pt, pio, et, em, moved, esize0, esize1, active0, active1)
            held[v] += busy
            _started(times, ident, now, busy, first_pass)
            running[v] = True
            qsize = _timeout(qt, qk, qsize, hole, now + busy, (seq << SHIFT) | (ident << 1))
            hole = False
            seq += 1
        nwait = 0
        first_pass = False
    for ident in range(remaining0.shape[0]):
        if remaining[ident] > 0:
            return np.nan                        # a node never started: a dependency cycle
    return now


@njit(**OPTS)
def _serial(n, n_res, info, rank_base, rank_inst, rank_copies, node_srv, shared, bf, bl, df, dl, wk, nbf, nbl, rate,
            pipe, pl, pc, ps, pt, pio, qt, qk, et, em, held, moved):
    """One sample in serial mode (engine._Model.run_serial): each core's nodes one after the other; busy
    times added to `held` and `moved` as _pipelined's."""
    n_ranks = rank_base.shape[0]
    esize0, esize1, active0, active1 = 0, 0, 0, 0
    qsize, seq, now, r0 = 0, 0, 0.0, 0
    while True:
        if r0 < n_ranks:                         # each core's process starts at 0, in core order
            r = r0
            r0 += 1
            nxt = rank_base[r]
        else:
            if qsize == 0:
                break
            now = qt[0]
            code = qk[0] & LOW
            qsize = qpop(qt, qk, qsize)
            ident = code >> 1
            x = info[ident]
            r = (x >> 12) & 0x7FF
            if (code & 1) == 0:
                k = x & 0xFFF
                d = df[k] if (x >> 23) & 1 else dl[k]
                if d != 0.0:
                    qsize = qpush(qt, qk, qsize, now + d, (seq << SHIFT) | (code | 1))
                    seq += 1
                    continue
            nxt = ident + 1
            if nxt >= rank_base[r] + rank_inst[r] * n:
                continue
        x = info[nxt]
        k, first = x & 0xFFF, (x >> 23) & 1
        busy = bf[k] if first else bl[k]         # engine.busy_time
        nb = nbf[k] if first else nbl[k]
        if shared[k] >= 0 and nb != 0:
            busy, esize0, esize1, active0, active1 = _shared_busy(
                k, first, rank_copies[r], now, shared[k], nb, rate, bf, bl, wk, pipe, pl, pc, ps, pt, pio, et, em,
                moved, esize0, esize1, active0, active1)
        held[r * n_res + node_srv[k]] += busy
        qsize = qpush(qt, qk, qsize, now + busy, (seq << SHIFT) | (nxt << 1))
        seq += 1
    return now


@njit(**OPTS)
def replay_samples(serial, samples, n, n_res, info, rank_base, rank_inst, rank_copies, rank_slots, next_state, next_war,
            remaining0, succ_ptr, succ_kind, succ_node, node_srv, slot_release, shared, busy_f, busy_l, delay_f,
            delay_l, work, bytes_f, bytes_l, rate, pipe, p_load, p_comp, p_store, p_tiles, p_io, makespan, busy,
            shared_busy, times):
    """The lanes `samples` of the durations, each replayed on its own: makespan[s], and where `busy` and
    `shared_busy` have a column per lane, each unit's busy time busy[core rank x units + unit, s] and each
    chip-wide bandwidth's shared_busy[bandwidth, s] (arrays of no columns: makespans only); where `times` has
    rows (one sample, pipelined), _pipelined's times of each node."""
    n_ev = remaining0.shape[0]
    n_ranks = rank_base.shape[0]
    n_srv = n_ranks * n_res
    per_res = np.zeros(n_res, np.int64)        # a unit's heap holds at most its core's nodes on that unit
    for k in range(n):
        per_res[node_srv[k]] += 1
    srv_off = np.zeros(n_srv, np.int64)
    total = 0
    for v in range(n_srv):
        srv_off[v] = total
        total += rank_inst[v // n_res] * per_res[v % n_res]
    heap, remaining = np.empty(max(total, 1), np.int64), np.empty(n_ev, np.int16)
    srv_size, running, pending = np.zeros(n_srv, np.int64), np.zeros(n_srv, np.bool_), np.zeros(n_srv, np.bool_)
    waiting = np.empty(n_srv + 1, np.int64)
    cap = n_ev + n_srv + 16
    qt, qk = np.empty(cap), np.empty(cap, np.int64)
    et, em = np.empty(2 * (n_ev + 1)), np.empty(2 * (n_ev + 1), np.int64)
    bf, bl, df, dl, wk = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    pl, pc, ps, pio = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    rt = np.empty(rate.shape[0])
    held, moved = np.empty(n_srv), np.empty(rate.shape[0])
    for j in range(samples.shape[0]):
        s = samples[j]
        held[:] = 0.0
        moved[:] = 0.0
        for k in range(n):                       # this sample's durations, side by side
            bf[k], bl[k], df[k], dl[k], wk[k] = busy_f[k, s], busy_l[k, s], delay_f[k, s], delay_l[k, s], work[k, s]
            pl[k], pc[k], ps[k], pio[k] = p_load[k, s], p_comp[k, s], p_store[k, s], p_io[k, s]
        for r in range(rate.shape[0]):
            rt[r] = rate[r, s]
        if serial:
            makespan[s] = _serial(n, n_res, info, rank_base, rank_inst, rank_copies, node_srv, shared, bf, bl, df, dl,
                                  wk, bytes_f, bytes_l, rt, pipe, pl, pc, ps, p_tiles, pio, qt, qk, et, em, held, moved)
        else:
            makespan[s] = _pipelined(n, n_res, info, rank_base, rank_inst, rank_copies, rank_slots, next_state,
                                     next_war, remaining0, succ_ptr, succ_kind, succ_node, node_srv, slot_release,
                                     shared, srv_off, bf, bl, df, dl, wk, bytes_f, bytes_l, rt, pipe, pl, pc, ps,
                                     p_tiles, pio, remaining, heap, srv_size, running, pending, waiting, qt, qk, et,
                                     em, held, moved, times)
        if busy.shape[1] > s:
            busy[:, s] = held
            shared_busy[:, s] = moved
