"""The host emulation of the AscendC API (ascendc_stubs/host) refuses what the real API refuses on Atlas A2.

Each rule is triggered by a tiny deliberately wrong kernel: a scenario of the emulator's self-test (run-time
refusals: the run fails with exit status 3 and one "api" error) or a case of host/conformance_static.cpp
(compile-time refusals: a static_assert). Each message must name the API, the argument and the rule. The rules
and their sources (asc-devkit declarations and docs, CANN docs) are the table in ascendc_stubs/CONFORMANCE.md.
The expected fragments below are written from those sources, not copied from the emulator's output."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "ascendc_stubs" / "host"

# scenario -> (API, argument, fragments of the rule); all must appear in the one "api" error of the run
RUNTIME_REFUSALS = {
    # CrossCoreSetFlag(ISASI).md / CANN 8.x docs: flag ids 0-10 on A2; 11-14 are SyncAll's
    "flagid": ("CrossCoreSetFlag", "flagId = 15", ("0-10",)),
    "waitflagid": ("CrossCoreWaitFlag", "flagId = 15", ("0-10",)),
    "reserved": ("CrossCoreSetFlag", "flagId = 12", ("11-14", "SyncAll")),
    # "不支持PIPE_S和PIPE_ALL" for modes 0-2
    "pipe_s": ("CrossCoreSetFlag", "pipe = PIPE_S", ("never PIPE_S or PIPE_ALL",)),
    "pipe_all": ("CrossCoreSetFlag", "pipe = PIPE_ALL", ("never PIPE_S or PIPE_ALL",)),
    # A2 supports modes 0, 1, 2; mode 4 is Ascend 950's
    "mode4": ("CrossCoreSetFlag", "modeId = 4", ("modes 0, 1, 2",)),
    # mode 2 needs a MIX_AIC_1_1 / MIX_AIC_1_2 kernel (table 3)
    "kerneltype": ("CrossCoreSetFlag", "modeId = 2", ("KERNEL_TYPE_MIX_AIC_1_1", "_1_2")),
    # N Matmul objects use flag ids [0, 2N-1]
    "matmulflag": ("CrossCoreSetFlag", "flagId = 1", ("Matmul", "[0, 1]")),
    # L1 is 512 KB per AIC on A2 (CANN platform config)
    "matmull1": ("REGIST_MATMUL_OBJ", "TCubeTiling", ("L1", "524288")),
    "l1buffer": ("TPipe::InitBuffer(TBuf)", "len = 614400", ("L1", "524288")),
    # UB is 192 KB per AIV on A2
    "ub": ("TPipe::InitBuffer(TBuf)", "len = 204800", ("Unified Buffer", "196608")),
    # DataCopy: count * sizeof(T) must be 32-byte aligned (else rounded down), DataCopyPad otherwise
    "dmalen": ("DataCopy GM->UB", "count = 7 (28 bytes)", ("multiple of 32", "DataCopyPad")),
    "dmacount": ("DataCopy GM->UB", "blockCount = 4096", ("[0, 4095]",)),
    "gmalign": ("DataCopy GM->UB", "GlobalTensor address", ("sizeof(T)",)),
    "align": ("Exp", "UB offset 4", ("32-byte aligned",)),
    # TQue: depth = consecutive EnQue; num buffers; at most 8 allocated per TPosition; 64 buffers per kernel
    "quedepth": ("TQue::EnQue", "depth = 1", ("2 EnQue without a DeQue",)),
    "quealloc": ("TQue::AllocTensor", "num = 1", ("FreeTensor is missing",)),
    "queempty": ("TQue::DeQue", "queue", ("empty",)),
    "position": ("TQue::AllocTensor", "TPosition::VECIN", ("more than 8",)),
    "buffers": ("TPipe::InitBuffer", "num = 1", ("at most 64",)),
    "tbufget": ("TBuf::Get", "len = 32", ("exceeds the 64 bytes",)),
    # dav_c220 SyncAllImpl: isAIVOnly = true is the AIVs' barrier; a mix kernel's all-core barrier is SyncAll<false>
    "syncall_aivonly": ("SyncAll<true>", "isAIVOnly = true", ("AIC",)),
}


@pytest.mark.parametrize("scenario", sorted(RUNTIME_REFUSALS))
def test_the_emulation_refuses_what_the_api_refuses(ascendc_build, tmp_path, scenario):
    api, argument, rule = RUNTIME_REFUSALS[scenario]
    p = subprocess.run([str(ascendc_build.selftest), scenario, str(tmp_path / "r.json")], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 3, p.stderr                      # the run fails, it does not pass silently
    errors = json.loads((tmp_path / "r.json").read_text())["errors"]
    refusals = [e["message"] for e in errors if e["kind"] == "api"]
    assert refusals, errors
    # the first refusal of that API (in "reserved" the AIVs' waits on flag 12 may be refused first)
    msg = next((m for m in refusals if m.partition(": ")[2].startswith(api + ": ")), refusals[0])
    # "coreN.UNIT: API: argument...: rule": the API first, then the argument, then the rule
    _, _, text = msg.partition(": ")
    assert text.startswith(api + ": "), msg
    assert argument in text[len(api) + 2:], msg
    for fragment in rule:
        assert fragment in msg, msg


def test_the_kernels_own_flags_pass_the_rules(ascendc_build, tmp_path):
    """A correct mode-2 hand-off (flag 1, both directions, no Matmul object) is not refused: the rules above do
    not fire on what the API accepts."""
    p = subprocess.run([str(ascendc_build.selftest), "mode2", str(tmp_path / "r.json")], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["errors"] == []


# case -> the static_assert text that names the API and the rule (host/conformance_static.cpp)
STATIC_REFUSALS = {
    "CaseAdd": "Add: T must be int16_t, half, int32_t or float",
    "CaseMuls": "Muls: T must be int16_t, half, int32_t or float",
    "CaseExp": "Exp: T must be half or float",
    "CaseReduceSum": "ReduceSum: T must be half or float",
    "CaseCast": "Cast: the emulation has float <-> bfloat16_t / half",
    "CaseQueue": "TQue: depth = 0",
    "CaseMatmulAB": "Matmul: A_TYPE::T and B_TYPE::T differ",
    "CaseMatmulC": "Matmul: this (A, C) type pair is not in the Atlas A2 rows",
}


def _compile(*defines: str) -> subprocess.CompletedProcess:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    return subprocess.run([cxx, "-std=c++17", "-fsyntax-only", f"-I{HOST}", *defines,
                           str(HOST / "conformance_static.cpp")], capture_output=True, text=True, timeout=120)


def test_type_rules_are_refused_at_compile_time():
    p = _compile()
    assert p.returncode != 0
    failed = [line for line in p.stderr.splitlines() if "static assertion failed" in line]
    for case, text in STATIC_REFUSALS.items():
        assert sum(text in line for line in failed) == 1, (case, text, failed)
    assert len(failed) == len(STATIC_REFUSALS), failed   # nothing else is refused
    # the same calls with types the API takes compile
    ok = _compile("-DKDA_CONFORMANCE_OK")
    assert ok.returncode == 0, ok.stderr


def test_syncall_orders_every_unit_and_a_missing_one_hangs(ascendc_build, tmp_path):
    """SyncAll<false>(): AIV0 writes GM before it, the AIC reads after it: ordered, no race (without the barrier
    the same accesses race: the self-test "race"). When AIV1 never arrives, the others hang in SyncAll."""
    ok = subprocess.run([str(ascendc_build.selftest), "syncall", str(tmp_path / "ok.json")], capture_output=True,
                        text=True, timeout=30)
    report = json.loads((tmp_path / "ok.json").read_text())
    assert ok.returncode == 0 and report["errors"] == [], report["errors"]
    barriers = [e for e in report["events"] if e["op"] == "syncall"]
    assert len(barriers) == 3                                  # the AIC and both AIVs of the one core
    assert [e["wrote"] for e in barriers if e["unit"] == "AIV" and e["sub"] == 0] == [["gm"]]
    hang = subprocess.run([str(ascendc_build.selftest), "syncall_hang", str(tmp_path / "h.json")],
                          capture_output=True, text=True, timeout=30)
    errors = json.loads((tmp_path / "h.json").read_text())["errors"]
    assert hang.returncode == 4
    assert any(e["kind"] == "hang" and "SyncAll<false>" in e["message"] and "2 of 3 units" in e["message"]
               for e in errors), errors
