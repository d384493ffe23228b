"""The event model's trace: rows sorted by start, made once; a representative core's rows copied to its class."""
from npusim import RIDE, build_template
from npusim.model.trace import Trace, copy_trace

from tests.npusim.model.test_engine import toy


def test_rows_sorted_by_start_then_core_sequence_chunk_node(toy_profile):
    tpl = build_template(toy(), toy_profile(), RIDE)
    tr = Trace(tpl)
    tr.add(2, 0, 0, 0, 6.0, 7.0, 7.0, 0, 0)
    tr.add(0, 1, 0, 0, 0.0, 1.0, 1.0, 0, 0)
    tr.add(0, 0, 0, 0, 0.0, 1.0, 1.0, 0, 0)
    tr.add(1, 0, 0, 0, 1.0, 5.0, 6.0, 4000, 0)
    rows = tr.events()
    assert len(tr) == 4
    assert [(r.start, r.core, r.index) for r in rows] == [(0.0, 0, 0), (0.0, 1, 0), (1.0, 0, 1), (6.0, 0, 2)]
    assert [r.name for r in rows] == [tpl.nodes[0].name, tpl.nodes[0].name, tpl.nodes[1].name, tpl.nodes[2].name]
    assert rows[2].nbytes == 4000 and rows[2].busy_end == 5.0 and rows[2].stretch == 1.0
    assert tr.events() is rows                        # made once
    tr.add(2, 1, 0, 0, 6.0, 7.0, 7.0, 0, 0)
    assert len(tr.events()) == 5                      # again when rows were added


def test_copy_trace_repeats_a_representative_core(toy_profile):
    tr = Trace(build_template(toy(), toy_profile(), RIDE))
    tr.add(0, 0, 0, 0, 0.0, 1.0, 1.0, 0, 0)
    tr.add(0, 1, 1, 0, 0.0, 2.0, 2.0, 0, 0)           # core 1 is in no class: not copied
    tr.occupancy.append((0.0, 0, 0, 4000))
    out = copy_trace(tr, {0: [0, 2]})
    # core 0's row for cores 0 and 2; sequences renumbered by the core (s - representative + core)
    assert list(zip(out.core, out.seq, out.end)) == [(0, 0, 1.0), (2, 2, 1.0)]
    assert out.occupancy == [(0.0, 0, 0, 4000), (0.0, 2, 0, 4000)]
