"""A pass's structure for the compiled event model (compiled.py): its simulated cores in the engine's order,
their instances, each node's successors as engine.complete visits them, packed in arrays; the profile's
durations come with each call (`Model.replay`), the samples shared among threads (threads.py).
"""
from __future__ import annotations

import numpy as np

from npusim.model.engine import Run, Template, edge_lists
from npusim.model.whatif.compiled import K_BITS, R_BITS, replay_samples
from npusim.model.whatif.threads import each_part


class Model:
    """A recorded replay's structure for the compiled event model: its simulated cores (in the engine's order),
    their instances, the template's edges; the profile's durations come with each call (`replay`)."""

    def __init__(self, tpl: Template, *, serial: bool, counts, interleave: int, slots: int, cores):
        """`cores`: the simulated cores as (core, its sequences, copies), as engine.core_layout lays them out
        (a recorded Run's log.cores); `counts`: each sequence's chunks; `slots`: the workspace's per lane."""
        n = self.n = tpl.n
        self.serial = serial
        resources = sorted({x.resource for x in tpl.nodes})
        self.n_res = len(resources)
        self.node_srv = np.array([resources.index(x.resource) for x in tpl.nodes], np.int64)
        in_intra = [len(x.deps) for x in tpl.nodes]
        out_intra: list[list[int]] = [[] for _ in range(n)]
        for x in tpl.nodes:
            for d in x.deps:
                out_intra[d].append(x.index)
        in_state, out_state = edge_lists(tpl.state_edges, n)
        in_war, out_war = edge_lists(tpl.war_edges, n)
        # each node's successors, as engine.complete visits them: this chunk's (0), the lane's next (1), the
        # sequence's next chunk's (2)
        ptr, kind, node = [0], [], []
        for k in range(n):
            for c, out in enumerate((out_intra, out_war, out_state)):
                kind += [c] * len(out[k])
                node += out[k]
            ptr.append(len(kind))
        self.succ_ptr, self.succ_kind = np.array(ptr, np.int64), np.array(kind, np.int64)
        self.succ_node = np.array(node, np.int64)
        use_slots = tpl.slot_release is not None and not serial
        self.slot_release = tpl.slot_release if use_slots else -1
        base, insts, copies, lanes, first, nxt_state, nxt_war, remaining = [], [], [], [], [], [], [], []
        self.instances: list[tuple[int, np.ndarray, np.ndarray]] = []   # each core's, with sequence and chunk
        total = 0
        for c, seqs, m in cores:
            seq, chunk, lane = _order(seqs, counts, interleave)
            self.instances.append((c, seq, chunk))
            base.append(total * n)
            insts.append(len(seq))
            copies.append(m)
            lanes.append(slots * min(interleave, len(seqs)))
            ns, nw = _next_same(seq), _next_same(lane)
            rem = np.tile(np.array(in_intra, np.int64), (len(seq), 1))
            for succ, into in ((nw, in_war), (ns, in_state)):
                rem[succ[succ >= 0]] += np.array(into, np.int64)      # an instance follows at most one in each
            if use_slots:
                rem[:, 0] += 1
            remaining.append(rem.reshape(-1))
            first.append((chunk == 0).astype(np.int64))
            nxt_state.append(ns)
            nxt_war.append(nw)
            total += len(seq)
        if n >= 1 << K_BITS or len(insts) >= 1 << R_BITS:
            raise ValueError(f"the compiled model takes at most {1 << K_BITS} nodes and {1 << R_BITS} cores")
        self.rank_base = np.array(base, np.int64)
        self.rank_inst = np.array(insts, np.int64)
        self.rank_copies = np.array(copies, np.int64)
        self.rank_slots = np.array(lanes, np.int64)
        self.next_state = np.concatenate(nxt_state)
        self.next_war = np.concatenate(nxt_war)
        self.remaining0 = np.concatenate(remaining)
        ranks = np.repeat(np.arange(len(insts), dtype=np.int64), np.array(insts, np.int64))
        inst = np.arange(total, dtype=np.int64)                    # every (core, instance), in core order
        nodes = np.tile(np.arange(n, dtype=np.int64), total)
        self.info = ((np.repeat(inst, n) << 24) | (np.repeat(np.concatenate(first), n) << 23)
                     | (np.repeat(ranks, n) << K_BITS) | nodes)

    @classmethod
    def of_run(cls, run: Run) -> "Model":
        """The model of a recorded replay (simulate(..., record=True))."""
        if run.log is None:
            raise ValueError("the run was not recorded (simulate(..., record=True))")
        return cls(run.template, serial=run.serial, counts=run.chunk_counts, interleave=run.interleave,
                   slots=run.profile.workspace.slots, cores=run.log.cores)

    def replay(self, params, samples) -> np.ndarray:
        """Makespans of the lanes `samples` of `params` (retime.Params), NaN elsewhere."""
        makespan = np.full(params.n, np.nan)
        self._replay(params, samples, makespan, np.zeros((1, 0)), np.zeros((1, 0)))
        return makespan

    def times(self, params, sample: int) -> np.ndarray:
        """Pipelined, lane `sample` of `params`: each node's (start, busy time, end, place in the order of
        completion, 1 where it started before the first event), a row per node as the model numbers them (core
        rank, instance, template node)."""
        out = np.full((len(self.remaining0), 5), np.nan)
        self._replay(params, [sample], np.full(params.n, np.nan), np.zeros((1, 0)), np.zeros((1, 0)), out)
        return out

    def busy_times(self, params, samples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(makespans, busy, shared busy) of the lanes `samples`: each unit's busy time, busy[core rank x units +
        unit, lane] (the units in name order), and each chip-wide bandwidth's, shared[bandwidth, lane]
        (retime.SHARED's order), as engine.simulate sums them."""
        makespan = np.full(params.n, np.nan)
        busy = np.zeros((len(self.rank_inst) * self.n_res, params.n))
        shared_busy = np.zeros((params.arrays["rate"].shape[0], params.n))
        self._replay(params, samples, makespan, busy, shared_busy)
        return makespan, busy, shared_busy

    def _replay(self, params, samples, makespan, busy, shared_busy, times=None) -> None:
        a = params.arrays
        shared = np.where(a["res_on"], a["res"], -1).astype(np.int64)

        def part(idx):
            replay_samples(self.serial, idx, self.n, self.n_res, self.info, self.rank_base, self.rank_inst,
                    self.rank_copies, self.rank_slots, self.next_state, self.next_war, self.remaining0,
                    self.succ_ptr, self.succ_kind, self.succ_node, self.node_srv, self.slot_release, shared,
                    a["busy_f"], a["busy_l"], a["delay_f"], a["delay_l"], a["work"], a["bytes_f"], a["bytes_l"],
                    a["rate"], a["pipe"], a["p_load"], a["p_comp"], a["p_store"], a["p_tiles"], a["p_io"], makespan,
                    busy, shared_busy, np.zeros((0, 5)) if times is None else times)

        each_part(part, np.asarray(samples, np.int64))


def _order(seqs, counts, interleave: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """engine.core_order as arrays: each instance's sequence, chunk and lane, in the order the core takes them
    (group by group of `interleave` sequences, chunk by chunk, lane by lane)."""
    seq = np.asarray(seqs, np.int64)
    n = np.asarray(counts, np.int64)[seq]
    pos = np.arange(len(seq), dtype=np.int64)
    which = np.repeat(pos, n)                                   # every (sequence, chunk), sequence by sequence
    chunk = np.arange(len(which), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    lane = pos % interleave
    order = np.lexsort((lane[which], chunk, which // interleave))
    return seq[which][order], chunk[order], lane[which][order]


def _next_same(keys: np.ndarray) -> np.ndarray:
    """Each instance's next instance with the same key (in the core's order), -1 for the last."""
    order = np.argsort(keys, kind="stable")
    out = np.full(len(keys), -1, np.int64)
    same = keys[order[1:]] == keys[order[:-1]]
    out[order[:-1][same]] = order[1:][same]
    return out
