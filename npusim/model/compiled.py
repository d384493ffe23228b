"""The event model of engine.py, compiled (numba): the replay of one profile's sample at a time, for the
samples whose decisions re-timing (maxplus.py) cannot reuse.

It makes the engine's decisions by the engine's rules and in its order: SimPy's queue of timeouts by
(time, order of scheduling), the units' and links' heaps of ready nodes (oldest first), the idle units
started once an event is handled (in the order their first ready node came), the slots granted chunk by chunk
on each release, the chip-wide bandwidths with the transfers under way; serial mode, each core's nodes one
after the other. Its durations are engine.py's busy_time with the same floating-point operations, so its
makespan is the engine's to the last bit (tests hold it to that). It knows no trace: what it returns is the
makespan and each unit's busy time.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def _qpush(qt, qs, qi, size, t, seq, ident):
    """SimPy's queue: timeouts by (time, order of scheduling); `ident` is the node (negative: a completion)."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if qt[p] < t or (qt[p] == t and qs[p] < seq):
            break
        qt[i], qs[i], qi[i] = qt[p], qs[p], qi[p]
        i = p
    qt[i], qs[i], qi[i] = t, seq, ident
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def _qpop(qt, qs, qi, size):
    size -= 1
    t, sq, v = qt[size], qs[size], qi[size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and (qt[a + 1] < qt[a] or (qt[a + 1] == qt[a] and qs[a + 1] < qs[a])):
            a += 1
        if qt[a] > t or (qt[a] == t and qs[a] > sq):
            break
        qt[i], qs[i], qi[i] = qt[a], qs[a], qi[a]
        i = a
    qt[i], qs[i], qi[i] = t, sq, v
    return size


@njit(cache=True, nogil=True, inline="always")
def _hpush(h, off, size, key):
    """Min-heap of ints in h[off:off + size]."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if h[off + p] <= key:
            break
        h[off + i] = h[off + p]
        i = p
    h[off + i] = key
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def _hpop(h, off, size):
    """The smallest key out of the heap (the caller stores size - 1)."""
    top = h[off]
    size -= 1
    key = h[off + size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and h[off + a + 1] < h[off + a]:
            a += 1
        if h[off + a] >= key:
            break
        h[off + i] = h[off + a]
        i = a
    h[off + i] = key
    return top


@njit(cache=True, nogil=True, inline="always")
def _epush(et, em, o, size, t, m):
    """Min-heap of (end, multiplicity) by end, in et[o:], em[o:]."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if et[o + p] <= t:
            break
        et[o + i], em[o + i] = et[o + p], em[o + p]
        i = p
    et[o + i], em[o + i] = t, m
    return size + 1


@njit(cache=True, nogil=True, inline="always")
def _epop(et, em, o, size):
    """The multiplicity of the earliest end, out of the heap (the caller stores size - 1)."""
    m0 = em[o]
    size -= 1
    t, mv = et[o + size], em[o + size]
    i = 0
    while True:
        a = 2 * i + 1
        if a >= size:
            break
        if a + 1 < size and et[o + a + 1] < et[o + a]:
            a += 1
        if et[o + a] >= t:
            break
        et[o + i], em[o + i] = et[o + a], em[o + a]
        i = a
    et[o + i], em[o + i] = t, mv
    return m0


@njit(cache=True, nogil=True, inline="always")
def _busy(now, k, first, m, s, shared, busy_f, busy_l, work, bytes_f, bytes_l, rate, pipe, p_load, p_comp,
          p_store, p_tiles, p_io, et, em, esize, active):
    """engine.py's busy_time: the time node k holds its unit from `now` (the shares updated)."""
    busy = busy_f[k, s] if first else busy_l[k, s]
    r = shared[k]
    if r >= 0:
        nb = bytes_f[k] if first else bytes_l[k]
        if nb != 0:
            off = r * (et.shape[0] // 2)
            while esize[r] > 0 and et[off] <= now:
                active[r] -= _epop(et, em, off, esize[r])
                esize[r] -= 1
            share = nb * (active[r] + m) / rate[r, s]
            if pipe[k]:
                io = p_io[k, s]
                t = io if io >= share else share
                if io > 0:
                    st = t / io
                    l_, c_, s_ = p_load[k, s] * st, p_comp[k, s], p_store[k, s] * st
                    top = l_ if l_ >= c_ else c_
                    top = top if top >= s_ else s_
                    busy = l_ + c_ + s_ + (p_tiles[k] - 1) * top
                else:
                    busy += t
            else:
                w = work[k, s]
                own = busy - w
                t = own if own >= share else share
                busy = w + t
            esize[r] = _epush(et, em, off, esize[r], now + t, m)
            active[r] += m
    return busy


@njit(cache=True, nogil=True, inline="always")
def _push(ident, k, r, n_res, node_srv, heap, srv_off, srv_size, running, pending, waiting, st):
    """A node is ready: onto its unit's heap; an idle unit waits to start once the event is handled."""
    v = r * n_res + node_srv[k]
    srv_size[v] = _hpush(heap, srv_off[v], srv_size[v], ident)
    if not running[v] and not pending[v]:
        pending[v] = True
        waiting[st[2]] = v
        st[2] += 1


@njit(cache=True, nogil=True)
def _one(serial, s, n, ev_rank, rank_base, rank_inst, rank_copies, rank_slots, inst_first, next_state, next_war,
         remaining0, intra_ptr, intra_idx, war_ptr, war_idx, state_ptr, state_idx, node_srv, n_res, slot_release,
         shared, busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, rate, pipe, p_load, p_comp, p_store,
         p_tiles, p_io, busy_out):
    """One sample: the makespan (busy time per (core, resource) into busy_out[:, s]); NaN on a deadlock."""
    n_ranks = rank_base.shape[0]
    n_ev = remaining0.shape[0]
    n_srv = n_ranks * n_res
    remaining = remaining0.copy()
    srv_size = np.zeros(n_srv, np.int64)
    srv_off = np.zeros(n_srv, np.int64)
    for v in range(n_srv):                       # a unit's heap holds at most its core's nodes
        r = v // n_res
        srv_off[v] = rank_base[r] * n_res + (v % n_res) * rank_inst[r] * n
    heap = np.empty(max(n_ev * n_res, 1), np.int64)
    running = np.zeros(n_srv, np.bool_)
    pending = np.zeros(n_srv, np.bool_)
    waiting = np.empty(n_srv + 1, np.int64)
    cap = n_ev + n_srv + 16
    qt, qs, qi = np.empty(cap), np.empty(cap, np.int64), np.empty(cap, np.int64)
    st = np.zeros(3, np.int64)                   # queue size, timeouts scheduled, units waiting
    et, em = np.empty(2 * (n_ev + 1)), np.empty(2 * (n_ev + 1), np.int64)
    esize, active = np.zeros(2, np.int64), np.zeros(2, np.int64)
    busy_of = np.empty(n_ev)
    free = rank_slots.copy()
    next_grant = np.zeros(n_ranks, np.int64)
    now = 0.0
    if serial:
        for r in range(n_ranks):                 # each core's process starts at 0, in core order
            ident = rank_base[r]
            b = _busy(0.0, 0, inst_first[ident], rank_copies[r], s, shared, busy_f, busy_l, work, bytes_f,
                      bytes_l, rate, pipe, p_load, p_comp, p_store, p_tiles, p_io, et, em, esize, active)
            busy_of[ident] = b
            st[0] = _qpush(qt, qs, qi, st[0], 0.0 + b, st[1], ident)
            st[1] += 1
        while st[0] > 0:
            now, ident = qt[0], qi[0]
            st[0] = _qpop(qt, qs, qi, st[0])
            released = ident >= 0
            ident = ident if released else -ident - 1
            r = ev_rank[ident]
            k = (ident - rank_base[r]) % n
            if released:
                busy_out[r * n_res + node_srv[k], s] += busy_of[ident]
                d = delay_f[k, s] if inst_first[ident] else delay_l[k, s]
                if d:
                    st[0] = _qpush(qt, qs, qi, st[0], now + d, st[1], -ident - 1)
                    st[1] += 1
                    continue
            nxt = ident + 1
            if nxt < rank_base[r] + rank_inst[r] * n:
                b = _busy(now, k + 1 if k + 1 < n else 0, inst_first[nxt], rank_copies[r], s, shared, busy_f,
                          busy_l, work, bytes_f, bytes_l, rate, pipe, p_load, p_comp, p_store, p_tiles, p_io, et,
                          em, esize, active)
                busy_of[nxt] = b
                st[0] = _qpush(qt, qs, qi, st[0], now + b, st[1], nxt)
                st[1] += 1
        return now
    use_slots = slot_release >= 0
    # every core's ready nodes, then its first slots granted (engine._Core); then the idle units start
    for r in range(n_ranks):
        lo, hi = rank_base[r], rank_base[r] + rank_inst[r] * n
        for ident in range(lo, hi):
            if remaining[ident] == 0:
                _push(ident, (ident - lo) % n, r, n_res, node_srv, heap, srv_off, srv_size, running, pending,
                      waiting, st)
        if use_slots:
            while free[r] > 0 and next_grant[r] < rank_inst[r]:
                free[r] -= 1
                j = lo + next_grant[r] * n
                next_grant[r] += 1
                remaining[j] -= 1
                if remaining[j] == 0:
                    _push(j, 0, r, n_res, node_srv, heap, srv_off, srv_size, running, pending, waiting, st)
    first_pass = True
    while first_pass or st[0] > 0:
        if not first_pass:
            now, ident = qt[0], qi[0]
            st[0] = _qpop(qt, qs, qi, st[0])
            released = ident >= 0
            ident = ident if released else -ident - 1
            r = ev_rank[ident]
            k = (ident - rank_base[r]) % n
            v = r * n_res + node_srv[k]
            done = True
            if released:                         # engine._released
                running[v] = False
                busy_out[v, s] += busy_of[ident]
                d = delay_f[k, s] if inst_first[ident] else delay_l[k, s]
                if d:
                    st[0] = _qpush(qt, qs, qi, st[0], now + d, st[1], -ident - 1)
                    st[1] += 1
                    done = False
            if done:                             # engine.complete
                base = ident - k
                g = (ident - rank_base[r]) // n
                for q in range(intra_ptr[k], intra_ptr[k + 1]):
                    j = base + intra_idx[q]
                    remaining[j] -= 1
                    if remaining[j] == 0:
                        _push(j, intra_idx[q], r, n_res, node_srv, heap, srv_off, srv_size, running, pending,
                              waiting, st)
                succ = next_war[rank_base[r] // n + g]
                if succ >= 0:
                    for q in range(war_ptr[k], war_ptr[k + 1]):
                        j = rank_base[r] + succ * n + war_idx[q]
                        remaining[j] -= 1
                        if remaining[j] == 0:
                            _push(j, war_idx[q], r, n_res, node_srv, heap, srv_off, srv_size, running, pending,
                                  waiting, st)
                succ = next_state[rank_base[r] // n + g]
                if succ >= 0:
                    for q in range(state_ptr[k], state_ptr[k + 1]):
                        j = rank_base[r] + succ * n + state_idx[q]
                        remaining[j] -= 1
                        if remaining[j] == 0:
                            _push(j, state_idx[q], r, n_res, node_srv, heap, srv_off, srv_size, running, pending,
                                  waiting, st)
                if use_slots and k == slot_release:
                    free[r] += 1
                    if next_grant[r] < rank_inst[r]:
                        free[r] -= 1
                        j = rank_base[r] + next_grant[r] * n
                        next_grant[r] += 1
                        remaining[j] -= 1
                        if remaining[j] == 0:
                            _push(j, 0, r, n_res, node_srv, heap, srv_off, srv_size, running, pending, waiting,
                                  st)
            if released and srv_size[v] > 0 and not pending[v]:
                st[2] += 1                       # start it now, ahead of the units waiting
                for x in range(st[2] - 1, 0, -1):
                    waiting[x] = waiting[x - 1]
                waiting[0] = v
                pending[v] = True
        first_pass = False
        j = 0
        while j < st[2]:                         # flush: start every idle unit with ready nodes, in order
            v = waiting[j]
            j += 1
            pending[v] = False
            if running[v] or srv_size[v] == 0:
                continue
            ident = _hpop(heap, srv_off[v], srv_size[v])
            srv_size[v] -= 1
            r = v // n_res
            k = (ident - rank_base[r]) % n
            b = _busy(now, k, inst_first[ident], rank_copies[r], s, shared, busy_f, busy_l, work, bytes_f,
                      bytes_l, rate, pipe, p_load, p_comp, p_store, p_tiles, p_io, et, em, esize, active)
            busy_of[ident] = b
            running[v] = True
            st[0] = _qpush(qt, qs, qi, st[0], now + b, st[1], ident)
            st[1] += 1
        st[2] = 0
    for ident in range(n_ev):
        if remaining[ident] > 0:
            return np.nan                        # a node never started: a dependency cycle
    return now


@njit(cache=True)
def replay_many(serial, samples, n, ev_rank, rank_base, rank_inst, rank_copies, rank_slots, inst_first, next_state,
                next_war, remaining0, intra_ptr, intra_idx, war_ptr, war_idx, state_ptr, state_idx, node_srv, n_res,
                slot_release, shared, busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, rate, pipe, p_load,
                p_comp, p_store, p_tiles, p_io, makespan, busy_out):
    """The samples `samples` (indices into the parameters' lanes), each replayed on its own."""
    for j in range(samples.shape[0]):
        s = samples[j]
        makespan[s] = _one(serial, s, n, ev_rank, rank_base, rank_inst, rank_copies, rank_slots, inst_first,
                           next_state, next_war, remaining0, intra_ptr, intra_idx, war_ptr, war_idx, state_ptr,
                           state_idx, node_srv, n_res, slot_release, shared, busy_f, busy_l, delay_f, delay_l,
                           work, bytes_f, bytes_l, rate, pipe, p_load, p_comp, p_store, p_tiles, p_io, busy_out)
