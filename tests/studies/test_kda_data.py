"""The shipped measured KDA rows (kda/validation/kda.csv) against the report they quote: flash-linear-attention-npu's
KDA_FORWARD_VALIDATION_REPORT.md, section 6 (the four A2 and A5 stages of the kernel at 3f80e2e6 and of the one
before, eb787032) and section 4 (whole forwards of the earlier single-op kernel). The figures below are typed
from the report, not read from the file."""
import csv

import pytest

from kda.studies.predictions import shipped
from kda.studies.validate import KDA

SHAPE = "B=1;T=8192;H=32;K=128;V=128;C=64"
# section 6, msopprof device means in ms: (Prepare, PostWu, FwdH, Finalize, 合计)
SECTION6 = {("a2", "3f80e2e6"): (9.604, 0.722, 0.800, 0.745, 11.871),
            ("a2", "eb787032"): (9.708, 0.716, 0.800, 0.744, 11.968),
            ("a5", "3f80e2e6"): (7.847, 0.607, 1.157, 0.600, 10.211),
            ("a5", "eb787032"): (7.964, 0.606, 1.162, 0.600, 10.332)}
# section 4, whole forwards in ms: after (351c6a7d), before
SECTION4 = {"fla-npu-s4-bnsd-h2-t16384": 3.531, "fla-npu-s4-ntd-h32-t65536": 127.648,
            "fla-npu-s4-bsnd-c9": 68.035, "fla-npu-s4-ntd-c33": 27.210,
            "fla-npu-s4-03d6099e-bnsd-h2-t16384": 4.751, "fla-npu-s4-03d6099e-ntd-h32-t65536": 206.142,
            "fla-npu-s4-03d6099e-bsnd-c9": 114.572, "fla-npu-s4-03d6099e-ntd-c33": 48.621}
STAGES = ("prepare", "post_wu", "fwd_h", "finalize", "")


def _rows():
    return {r["id"]: r for r in csv.DictReader(KDA.open(encoding="utf-8"))}


def test_section_6_rows_are_the_report_s_figures():
    rows = _rows()
    for (chip, commit), figures in SECTION6.items():
        tag = "" if commit == "3f80e2e6" else f"-{commit}"
        for stage, ms in zip(STAGES, figures):
            r = rows[f"fla-npu-{chip}{tag}-{stage or 'total'}"]
            assert (r["stage"], r["shape"], r["dtype"], r["kernel_commit"]) == (stage, SHAPE, "fp16", commit)
            assert float(r["measured_us"]) == pytest.approx(ms * 1000) and f"{ms:.3f} ms" in r["quoted"]


def test_each_total_is_the_sum_of_its_four_stages():
    """The report's 合计 is the sum of the stage means (to the last printed digit), not a timed region."""
    for figures in SECTION6.values():
        assert abs(sum(figures[:4]) - figures[4]) < 0.0015
    rows = _rows()
    assert all("not one timed region" in rows[i]["timed"] for i in rows if i.endswith("-total"))


def test_only_the_a2_rows_of_the_modelled_kernel_are_predicted_and_every_row_is_held_out():
    rows = {i: r for i, r in _rows().items() if not i.startswith("fla-npu-pr244")}   # ChunkKdaFwd's rows
    modelled = {i for i, r in rows.items() if not r["not_modelled"]}
    assert modelled == {f"fla-npu-a2-{s or 'total'}" for s in STAGES}
    assert all(r["held_out"] == "yes" for r in rows.values())
    assert all("A5" in rows[i]["not_modelled"] for i in rows if i.startswith("fla-npu-a5"))
    assert all("earlier kernel version" in rows[i]["not_modelled"] for i in rows
               if i.startswith(("fla-npu-a2-eb787032", "fla-npu-s4")))
    assert len(rows) == 4 * 5 + 16


def test_section_4_whole_forwards_are_the_report_s_figures():
    rows = _rows()
    for rid, ms in SECTION4.items():
        assert float(rows[rid]["measured_us"]) == pytest.approx(ms * 1000) and rows[rid]["stage"] == ""
    parts = {"fla-npu-s4-bnsd-h2-t16384-prepare": 1.512, "fla-npu-s4-bnsd-h2-t16384-fwd_h": 1.385,
             "fla-npu-s4-ntd-h32-t65536-prepare": 93.123, "fla-npu-s4-ntd-h32-t65536-finalize": 21.991,
             "fla-npu-s4-bsnd-c9-prepare": 42.374, "fla-npu-s4-bsnd-c9-layout": 10.011,
             "fla-npu-s4-ntd-c33-prepare": 19.064, "fla-npu-s4-ntd-c33-finalize": 5.114}
    for rid, ms in parts.items():
        assert float(rows[rid]["measured_us"]) == pytest.approx(ms * 1000)


def test_every_modelled_row_has_a_registered_prediction_with_its_kernel_stage_and_shape():
    preds = {}
    for path in shipped():
        preds.update({r["id"]: r for r in csv.DictReader(path.open(encoding="utf-8"))})
    for rid, r in _rows().items():
        if r["not_modelled"]:
            continue
        p = preds[rid]
        assert (p["kernel"], p["stage"], p["shape"], p["dtype"]) == (r["kernel"], r["stage"], r["shape"], r["dtype"])
        assert float(p["predicted_us"]) > 0
