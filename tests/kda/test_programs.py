"""The v1/v2/v3 phase graphs: hand-offs, bytes and work, all measured from the recorded data flow."""
import pytest

from kda.settings import Settings
from kda.studies.evaluate import evaluate
from npusim import OWN, build_template, load_profile

KIB = 1024


@pytest.fixture(scope="module")
def runs():
    s = Settings(chunks=2, dtype="bf16", profile="seed-doc")
    return {v: evaluate(v, s) for v in ("v1", "v2", "v3")}


def test_v3_has_the_documents_six_syncs_and_byte_table(runs):
    g = runs["v3"].execution.graph
    assert [p.name for p in g.phases] == list("ABCDEFG")
    assert [s.tensors for s in g.syncs] == [("K_scaled", "K_div", "Q_scaled", "K_decay", "V"), ("A_raw",), ("M",),
                                            ("U", "WS", "O_inter", "A_qk_raw"), ("A_qk", "V_pseudo"),
                                            ("O_intra", "S_delta")]
    assert [b // KIB for b in g.sync_bytes] == [80, 8, 8, 56, 24, 48]
    (v,) = [p for p in g.syncs[0].payload if p.redundant]
    assert (v.name, v.nbytes, v.redundant) == ("V", 16 * KIB, "already in GM (an input)")
    assert g.redundant_bytes == 16 * KIB and g.unused_bytes == 0
    assert g.kept == ("gamma_C",)
    assert {n for n, t in g.tensors.items() if t.placement == "resident"} == {"Q_scaled", "K_decay"}


def test_v3_state_rides_on_sync_3(runs):
    rep = runs["v3"].report
    assert rep.syncs_per_chunk == 6 and rep.state.mode == "ride" and rep.state.rides_on == "③"
    assert rep.state.nbytes == 32 * KIB and rep.state.producer == "G" and rep.state.readers == ("D", "G")


def test_v3_communication_time_under_the_documents_assumptions(runs):
    rep = runs["v3"].report
    # 6 x 1 us + 224 KiB / 100 GB/s: the document rounds this to 8.2 us
    assert rep.sync_us_per_chunk == pytest.approx(6 + 224 * KIB / 100e3)
    assert round(rep.sync_us_per_chunk, 2) == 8.29


def test_macs_per_phase_from_the_recorded_ops(runs):
    g = runs["v3"].execution.graph
    C, d = 64, 128
    assert g.macs_by_phase() == {"B": C * C * d, "D": 3 * C * C * d + 2 * C * d * d, "F": C * C * d + C * d * d}
    assert g.macs_by_phase()["D"] == 3_670_016          # the document's table 7.1 says 4.7 M
    assert g.macs == 5_767_168                          # it says 6.7 M in all


def test_v2_needs_ten_syncs_and_the_state_hand_off(runs):
    g = runs["v2"].execution.graph
    assert len(g.phases) == 11 and len(g.syncs) == 10                 # 11 phases have 10 boundaries
    assert [b // KIB for b in g.sync_bytes] == [48, 8, 8, 64, 16, 8, 8, 16, 16, 32]
    assert g.unused_bytes == 16 * KIB                                  # W goes to the Vector unit for nothing
    assert runs["v2"].report.state.rides_on == "③"
    # with the state hand-off as a sync of its own, a chunk costs the document's 11 hand-offs
    own = build_template(g, load_profile("seed-doc"), OWN)
    assert sum(n.kind in ("sync", "state") for n in own.nodes) == 11


def test_v1_is_v2_with_the_state_decayed_along_the_value_axis(runs):
    g1, g2 = runs["v1"].execution.graph, runs["v2"].execution.graph
    assert g1.sync_bytes == g2.sync_bytes and [p.name for p in g1.phases] == [p.name for p in g2.phases]


def test_workspace_plan_of_the_document_fits_v3_in_two_bytes_only():
    r = evaluate("v3", Settings(chunks=1, dtype="fp32", profile="seed-doc"))
    assert r.report is None
    assert r.workspace_error == ("v3: the resident region needs 128 KiB (Q_scaled 32, K_decay 32, S_prev 64 KiB) "
                                 "but the plan has 64 KiB")
