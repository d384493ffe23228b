"""The design document's figures as kda.studies.claims holds them agree with themselves the way the document's
tables do: the per-hand-off bytes add to the total, the phase counts to theirs, and a chunk's latency is its
hand-offs' time plus the Cube's and the Vector's."""
import pytest

from kda.studies.claims import CLAIMS


def test_every_claim_names_its_source_and_its_hand_offs():
    assert set(CLAIMS) == {"v1", "v2", "v3"}
    for version, claim in CLAIMS.items():
        assert claim["source"].startswith("table"), version
        assert claim["syncs"] > 0 and claim["latency_us"] > 0


def test_the_bytes_per_hand_off_add_to_the_total():
    assert sum(CLAIMS["v2"]["sync_kib"]) == 232 == CLAIMS["v2"]["total_kib"]     # 48+8+8+64+16+48+40
    assert sum(CLAIMS["v3"]["sync_kib"]) == 224 == CLAIMS["v3"]["total_kib"]     # 80+8+8+56+24+48


def test_the_hand_offs_listed_cover_the_count():
    assert len(CLAIMS["v3"]["sync_kib"]) == CLAIMS["v3"]["syncs"] == 6
    # v2: six hand-offs one by one, then hand-offs 7-11 given together as one entry (five more)
    assert len(CLAIMS["v2"]["sync_kib"]) - 1 + 5 == CLAIMS["v2"]["syncs"] == 11


@pytest.mark.parametrize("version, total", [("v2", 16.8), ("v3", 11.7)])
def test_the_latency_is_hand_offs_plus_cube_plus_vector(version, total):
    c = CLAIMS[version]
    assert c["sync_us"] + c["cube_us"] + c["vec_us"] == pytest.approx(total)
    assert c["latency_us"] == pytest.approx(total)


def test_the_phase_counts_add_to_their_totals():
    v3 = CLAIMS["v3"]
    assert sum(v3["vec_ops"].values()) == 124_000 == v3["total_vec_ops"]          # 80k+12k+12k+20k
    # 0.524 M + 4.7 M + 1.5 M = 6.724 M: the document rounds the total to 6.7 M
    assert sum(v3["macs"].values()) == 6_724_000
    assert v3["total_macs"] == pytest.approx(6_724_000, rel=0.01)
    assert set(v3["macs"]) == {"B", "D", "F"} and set(v3["vec_ops"]) == {"A", "C", "E", "G"}
