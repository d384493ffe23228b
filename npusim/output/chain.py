"""The longest dependency path through a sequence's chunks (report.chain_us), compiled (numba) for one profile:
the same maxima and sums, in the same order, as the Python loop it stands for."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def longest_chain(chunks, n, index, dep_ptr, dep_idx, state_ptr, state_idx, first, later):
    """Nodes in program order (a topological order): `index` each one's slot, its intra-chunk deps and its state
    sources (the previous chunk's nodes) as CSR lists, its duration in the first chunk and in the later ones."""
    prev = np.zeros(n)
    fin = np.zeros(n)
    for t in range(chunks):
        fin = np.zeros(n)
        for k in range(len(index)):
            ready = 0.0
            for j in range(dep_ptr[k], dep_ptr[k + 1]):
                if fin[dep_idx[j]] > ready:
                    ready = fin[dep_idx[j]]
            if t > 0:
                for j in range(state_ptr[k], state_ptr[k + 1]):
                    if prev[state_idx[j]] > ready:
                        ready = prev[state_idx[j]]
            fin[index[k]] = ready + (later[k] if t > 0 else first[k])
        prev = fin
    best = prev[0]
    for i in range(1, n):
        if prev[i] > best:
            best = prev[i]
    return best
