"""The vectorised merge the overlap metrics use on a trace's columns, against a brute-force union: on integer
intervals, a point p + 0.5 lies in the union exactly when some interval [a, b) has a <= p < b."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npusim.output.overlap import _merge_groups

grouped = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 40)), max_size=40)


def covered(ivs) -> set[int]:
    return {p for a, b in ivs for p in range(a, b)}


@given(rows=grouped)
def test_each_group_merged_as_the_brute_force_union(rows):
    key = np.array([k for k, _, _ in rows], dtype=np.int64)
    a = np.array([s for _, s, _ in rows], dtype=np.float64)
    b = np.array([e for _, _, e in rows], dtype=np.float64)
    out = _merge_groups(key, a, b, [s for _, s, _ in rows])
    assert set(out) == {k for k, _, _ in rows}                      # a group of empty intervals maps to []
    for k, merged in out.items():
        mine = [(s, e) for g, s, e in rows if g == k]
        assert all(lo < hi for lo, hi in merged)
        assert all(p[1] < q[0] for p, q in zip(merged, merged[1:]))  # sorted, disjoint, not touching
        assert covered((int(lo), int(hi)) for lo, hi in merged) == covered(mine)
        assert all(type(lo) is int for lo, _ in merged)             # each start as given
