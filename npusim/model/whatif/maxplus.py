"""The max-plus pass of re-timing (retime.py): a recorded replay's events, in the order the replay started
them, timed for many samples at once, each event's start the latest of what it waits for.

For event e (node k of an instance, on a unit or link of a core) and each sample:

    ready    R = the latest completion of its predecessors (the nodes of its chunk it depends on, the
               previous chunk's producer of the state, the lane's previous reader of a resident tensor, the
               release that granted its slot); 0 where it has none
    start    S = max(R, the release of the previous event on its unit or link)      (serial mode: S = R,
               its predecessor being the event before it on the core)
    busy     B as engine.py computes it: with a chip-wide bandwidth, the transfer takes
               t = max(own time, bytes x (multiplicity under way + its own copies) / chip rate), and a
               phase's overlapped pipes are stretched by t / their own transfer time
    release  S + B;  completion  S + B + delay

The same floating-point operations in the same order as the engine, so an accepted sample's times are the
replay's to the last bit.

Bandwidth shares. Which transfers are under way when one starts depends on the other cores and units, whose
order against it moves with every duration. Only a transfer whose share can exceed its own time needs the
count: one whose own time covers the share of every transfer within its window (the recorded transfers on
its bandwidth started just before and after it) takes its own time whatever the count. For the others the
count is taken over the window from the times themselves; a transfer that started later in the recorded
order but earlier in this sample is counted from the previous pass, and the pass is repeated until the
counts no longer change (a fixed point: every transfer's duration follows from the times it gives, so the
times are those of the event model). The window must hold every transfer under way: checked.

A sample is accepted where it keeps every decision the replay made that re-timing does not re-derive:

  - unit order: no event that waited on a unit was ready when a younger one started there (the previous
    younger one, `jstar`), nor when the unit, idle, started the last event that found it idle;
  - slots: the releases that granted slots complete in the recorded order;
  - a tie (two times exactly equal) only where the nominal replay had the same tie: the replay's order of
    simultaneous events is then the recorded one.

`learn=True` times the nominal profile with the recorded counts and records its ties instead of checking them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from npusim.model.whatif.compiled import busy_past_share

BLOCK = 16          # samples timed together (an event's times for the block lie side by side)
PASSES = 3          # the most passes a block takes to reach the fixed point of the shares (then: compiled replay)
# why a sample is not accepted (bits of `reasons`)
IDLE, OLDER, SLOTS, TIE, WINDOW, UNSETTLED = 1, 2, 4, 8, 16, 32
REASONS = {IDLE: "a unit, idle, would have started another event first",
           OLDER: "an older event was ready when a unit started a younger one",
           SLOTS: "slots released in another order", TIE: "a tie the nominal replay did not have",
           WINDOW: "a transfer under way outside its window", UNSETTLED: "the bandwidth shares did not settle"}


@njit(cache=True, nogil=True, inline="always")
def _overtakes(ready, seen, learn, tied):
    """Whether an event ready at `ready` breaks the replay's order against one its unit started at `seen`: ready
    earlier, or at the same time where the nominal replay had no tie (`tied`; `learn`: ties are recorded)."""
    return ready < seen or (not learn and ready == seen and not tied)


@njit(cache=True, nogil=True)
def _pass(serial, learn, again, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
          tie_a, tie_idle, tie_last, ev_res, tpos, wlo, whi, wsum, seq, seq_off, s_nom,
          busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp, p_store,
          p_tiles, p_io, lo, start, release, done, t_end, start_prev, tend_prev, pm, used, last, good, why,
          busy_srv, times):
    """One pass over the events in the order the replay started them, each for the block's samples side by
    side: its start, whether the replay's order holds there, how long it holds its unit or link."""
    last[:, :] = -1
    for e in range(ev_node.shape[0]):
        k = ev_node[e]
        first = ev_first[e]
        r = ev_res[e]
        q0, q1 = pred_ptr[e], pred_ptr[e + 1]
        sp, js, srv = srv_prev[e], jstar[e], ev_srv[e]
        for b in range(start.shape[1]):
            s = lo + b
            ready = 0.0
            for q in range(q0, q1):
                c = done[pred_idx[q], b]
                if c > ready:
                    ready = c
            # when it starts, and whether the replay's order holds
            if serial or sp < 0:
                at = ready
                idle = not serial
            else:
                free = release[sp, b]
                at = ready if ready > free else free
                if learn:
                    tie_idle[e] = ready == free
                idle = ready > free or (ready == free and not tie_idle[e])
            if not serial:
                li = last[srv, b]
                if li >= 0:
                    if learn and ready == start[li, b]:
                        tie_last[e] = li
                    if _overtakes(ready, start[li, b], learn, tie_last[e] == li):
                        good[b] = False
                        why[b] |= IDLE
                if js >= 0:
                    if learn:
                        tie_a[e] = ready == start[js, b]
                    if _overtakes(ready, start[js, b], learn, tie_a[e]):
                        good[b] = False
                        why[b] |= OLDER
                if idle:
                    last[srv, b] = e
            # how long it holds its unit or link (engine.py's busy_time)
            busy = busy_f[k, s] if first else busy_l[k, s]
            if r >= 0:
                nb = bytes_f[k] if first else bytes_l[k]
                m = ev_m[e]
                own = p_io[k, s] if pipe[k] else busy - work[k, s]
                if learn:
                    count = ev_act[e]
                elif nb * (wsum[e] + m) / rate[r, s] <= own:
                    count = 0                  # its own time, whatever the count: not counted
                    used[e, b] = -1
                else:
                    count, after = _count(e, b, at, r, tpos, wlo, whi, seq, seq_off, ev_m, start, t_end,
                                          start_prev, tend_prev, again, s_nom, good, why)
                    used[e, b] = after
                busy, t = busy_past_share(first, busy_f[k, s], busy_l[k, s], nb * (count + m) / rate[r, s], pipe[k],
                                          p_io[k, s], p_load[k, s], p_comp[k, s], p_store[k, s], p_tiles[k], work[k, s])
                t_end[e, b] = at + t
                p = seq_off[r] + tpos[e]
                prev = pm[p - 1, b] if tpos[e] > 0 else -np.inf
                pm[p, b] = prev if prev >= t_end[e, b] else t_end[e, b]
                if not learn and wlo[e] > 0 and pm[seq_off[r] + wlo[e] - 1, b] > at:
                    good[b] = False            # a transfer before its window still under way
                    why[b] |= WINDOW
            rel = at + busy
            delay = delay_f[k, s] if first else delay_l[k, s]
            start[e, b] = at
            release[e, b] = rel
            done[e, b] = rel + delay if delay else rel
            busy_srv[srv, b] += busy
            if learn:
                times[e, 0] = at
                times[e, 1] = t_end[e, b]


@njit(cache=True, nogil=True, inline="always")
def _count(e, b, at, r, tpos, wlo, whi, seq, seq_off, ev_m, start, t_end, start_prev, tend_prev, again, s_nom,
           good, why):
    """The multiplicity under way when transfer e starts at `at`, over its window; and the part of it from
    transfers after e in the recorded order (taken from the previous pass)."""
    p = tpos[e]
    off = seq_off[r]
    count = 0
    after = 0
    for q in range(wlo[e], whi[e] + 1):
        if q == p:
            continue
        y = seq[off + q]
        if q < p:
            sy, ty = start[y, b], t_end[y, b]
        elif again:
            sy, ty = start_prev[y, b], tend_prev[y, b]
        else:
            continue
        if sy == at and s_nom[y] != s_nom[e]:
            good[b] = False                    # a tie the nominal replay did not have
            why[b] |= TIE
        if (sy < at or (sy == at and q < p)) and ty > at:
            count += ev_m[y]
            if q > p:
                after += ev_m[y]
    return count, after


@njit(cache=True, nogil=True)
def _settle(ev_res, tpos, wlo, whi, seq, seq_off, ev_m, s_nom, trig_a, trig_b, start, done, t_end, used, good,
            why, settled):
    """After a pass: every transfer after its window starts later; the counts a transfer took from the
    previous pass hold for this one (else `settled` is False: another pass); the slot grants in order."""
    width = start.shape[1]
    n_res = seq_off.shape[0] - 1
    for b in range(width):
        settled[b] = True
    for r in range(n_res):
        off, end = seq_off[r], seq_off[r + 1]
        n = end - off
        if n == 0:
            continue
        smin = np.empty((n + 1, width))
        smin[n, :] = np.inf
        for q in range(n - 1, -1, -1):
            y = seq[off + q]
            for b in range(width):
                v = start[y, b]
                smin[q, b] = v if v < smin[q + 1, b] else smin[q + 1, b]
        for q in range(n):
            e = seq[off + q]
            h = whi[e] + 1
            for b in range(width):
                if smin[h, b] <= start[e, b]:
                    good[b] = False            # a transfer after its window started no later
                    why[b] |= WINDOW
                if used[e, b] >= 0:
                    _, after = _count(e, b, start[e, b], r, tpos, wlo, whi, seq, seq_off, ev_m, start, t_end,
                                      start, t_end, True, s_nom, good, why)
                    if after != used[e, b]:
                        settled[b] = False
    for g in range(trig_a.shape[0]):
        for b in range(width):
            if done[trig_a[g], b] > done[trig_b[g], b]:
                good[b] = False
                why[b] |= SLOTS


@njit(cache=True, nogil=True)
def _block(serial, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
           tie_a, tie_idle, tie_last, ev_res, tpos, wlo, whi, wsum, seq, seq_off, s_nom, trig_a, trig_b,
           busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp, p_store,
           p_tiles, p_io, n_srv, lo, hi, makespan, ok, passes, reasons, busy_srv):
    """Samples lo..hi-1, pass after pass until the shares settle (or PASSES): their makespans, whether each
    kept the recorded order (`ok`), the passes taken."""
    n_ev = ev_node.shape[0]
    width = hi - lo
    start, release = np.empty((n_ev, width)), np.empty((n_ev, width))
    done, t_end = np.empty((n_ev, width)), np.zeros((n_ev, width))
    start_prev, tend_prev = np.empty((n_ev, width)), np.zeros((n_ev, width))
    pm = np.empty((seq.shape[0], width))
    used = np.full((n_ev, width), -1, np.int64)
    last = np.full((n_srv, width), -1, np.int64)
    good = np.ones(width, np.bool_)
    why = np.zeros(width, np.int64)
    settled = np.zeros(width, np.bool_)
    busy = np.zeros((n_srv, width))
    times = np.empty((0, 2))
    count = 0
    for i in range(PASSES):
        busy[:, :] = 0.0
        good[:] = True
        why[:] = 0
        _pass(serial, False, i > 0, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
              tie_a, tie_idle, tie_last, ev_res, tpos, wlo, whi, wsum, seq, seq_off, s_nom,
              busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp,
              p_store, p_tiles, p_io, lo, start, release, done, t_end, start_prev, tend_prev, pm, used, last,
              good, why, busy, times)
        count = i + 1
        _settle(ev_res, tpos, wlo, whi, seq, seq_off, ev_m, s_nom, trig_a, trig_b, start, done, t_end, used,
                good, why, settled)
        if settled.all():
            break
        start_prev[:, :] = start
        tend_prev[:, :] = t_end
    for b in range(width):
        span = 0.0
        for e in range(n_ev):
            if done[e, b] > span:
                span = done[e, b]
        makespan[lo + b] = span
        ok[lo + b] = good[b] and settled[b]
        passes[lo + b] = count
        reasons[lo + b] = why[b] | (0 if settled[b] else UNSETTLED)
        for j in range(n_srv):
            busy_srv[j, lo + b] = busy[j, b]


@njit(cache=True)
def retime_blocks(serial, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
            tie_a, tie_idle, tie_last, ev_res, tpos, wlo, whi, wsum, seq, seq_off, s_nom, trig_a, trig_b,
            busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp, p_store,
            p_tiles, p_io, n_srv, makespan, ok, passes, reasons, busy_srv):
    n = makespan.shape[0]
    n_blocks = (n + BLOCK - 1) // BLOCK
    for i in range(n_blocks):
        lo = i * BLOCK
        hi = min(n, lo + BLOCK)
        _block(serial, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
               tie_a, tie_idle, tie_last, ev_res, tpos, wlo, whi, wsum, seq, seq_off, s_nom, trig_a, trig_b,
               busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp,
               p_store, p_tiles, p_io, n_srv, lo, hi, makespan, ok, passes, reasons, busy_srv)


@njit(cache=True)
def learn(serial, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
          tie_a, tie_idle, tie_last, ev_res, tpos, seq, seq_off,
          busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp, p_store,
          p_tiles, p_io, n_srv, times):
    """The nominal profile (one sample) with the recorded counts: its ties (into tie_*), each event's start
    and transfer end (`times`); whether the recorded order holds, the makespan."""
    n_ev = ev_node.shape[0]
    start, release = np.empty((n_ev, 1)), np.empty((n_ev, 1))
    done, t_end = np.empty((n_ev, 1)), np.zeros((n_ev, 1))
    pm = np.empty((seq.shape[0], 1))
    used = np.full((n_ev, 1), -1, np.int64)
    last = np.full((n_srv, 1), -1, np.int64)
    good = np.ones(1, np.bool_)
    why = np.zeros(1, np.int64)
    busy = np.zeros((n_srv, 1))
    dummy = np.zeros(n_ev, np.int64)
    _pass(serial, True, False, ev_node, ev_first, ev_m, ev_act, ev_srv, pred_ptr, pred_idx, srv_prev, jstar,
          tie_a, tie_idle, tie_last, ev_res, tpos, dummy, dummy, dummy, seq, seq_off, np.zeros(n_ev),
          busy_f, busy_l, delay_f, delay_l, work, bytes_f, bytes_l, res, rate, pipe, p_load, p_comp, p_store,
          p_tiles, p_io, 0, start, release, done, t_end, start, t_end, pm, used, last, good, why, busy, times)
    span = 0.0
    for e in range(n_ev):
        if done[e, 0] > span:
            span = done[e, 0]
    return good[0], span


@njit(cache=True)
def _previous_greater(keys, order, group):
    out = np.full(keys.shape[0], -1, np.int64)
    stack = np.empty(keys.shape[0], np.int64)
    top = 0
    for j in range(order.shape[0]):
        i = order[j]
        if j > 0 and group[i] != group[order[j - 1]]:
            top = 0
        while top > 0 and keys[stack[top - 1]] < keys[i]:
            top -= 1
        if top > 0:
            out[i] = stack[top - 1]
        stack[top] = i
        top += 1
    return out


def previous_greater(keys: np.ndarray, group: np.ndarray) -> np.ndarray:
    """For each position, the last earlier position of the same group with a key at least as large (-1 if
    none; equal keys count): the younger event a unit started before this one."""
    return _previous_greater(keys, np.argsort(group, kind="stable"), group)
