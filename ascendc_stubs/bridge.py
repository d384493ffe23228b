"""Python side of the AscendC skeletons (kda_chunk_v3, v4, v5, v6): input/output files, the host-emulation build
and run, and what the simulator says a kernel's flags and payloads must be (v5: pass by pass).

File format (shared with the NPU flow, README "On real hardware"): a directory with meta.txt ("key value"
lines: B T H K V C dtype gate h0 scale) and raw little-endian arrays in FLA's layout: q.bin, k.bin, v.bin in the
transfer type (fp32, bf16; fp16 for kda_chunk_v6), g.bin (log decay, or alpha when gate = alpha), beta.bin, h0.bin in fp32; the
kernel writes o.bin [B, T, H, V] and ht.bin [B, H, K, V] in fp32.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from kda.driver.inputs import KdaInputs
from npusim.record.graph import PhaseGraph
from npusim.model.template import STATE, SYNC, Template

HERE = Path(__file__).resolve().parent
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
KERNELS = {"v3": "kda_chunk_v3", "v4": "kda_chunk_v4", "v5": "kda_chunk_v5",
           "v6": "kda_chunk_v6"}   # version / design -> kernel


@dataclass(frozen=True)
class Meta:
    B: int
    T: int
    H: int
    K: int
    V: int
    C: int
    dtype: str
    gate: str            # "log": g is the log decay (FLA); "alpha": g.bin holds alpha = exp(g)
    h0: bool
    scale: float


def _save(path: Path, x: torch.Tensor) -> None:
    x = x.detach().contiguous().cpu()
    raw = x.view(torch.int16) if x.dtype == torch.bfloat16 else x
    raw.numpy().tofile(path)


def _load(path: Path, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    data = bytearray(path.read_bytes())
    return torch.frombuffer(data, dtype=dtype).reshape(shape).clone()


def write_inputs(d: Path, x: KdaInputs, *, dtype: str = "fp32", chunk_size: int = 64, gate: str = "log",
                 scale: float | None = None) -> Meta:
    """Write x as the kernel reads it: q, k, v rounded to the transfer type; g (or alpha), beta, h0 in fp32."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if gate not in ("log", "alpha"):
        raise ValueError(f"gate must be 'log' or 'alpha', got {gate!r}")
    B, T, H, K = x.q.shape
    V = x.v.shape[-1]
    meta = Meta(B, T, H, K, V, chunk_size, dtype, gate, x.initial_state is not None,
                K ** -0.5 if scale is None else scale)
    d.mkdir(parents=True, exist_ok=True)
    for name in ("q", "k", "v"):
        _save(d / f"{name}.bin", getattr(x, name).to(DTYPES[dtype]))
    _save(d / "g.bin", (x.g.exp() if gate == "alpha" else x.g).float())
    _save(d / "beta.bin", x.beta.float())
    if x.initial_state is not None:
        _save(d / "h0.bin", x.initial_state.float())
    lines = [f"B {B}", f"T {T}", f"H {H}", f"K {K}", f"V {V}", f"C {chunk_size}", f"dtype {dtype}",
             f"gate {gate}", f"h0 {int(meta.h0)}", f"scale {meta.scale!r}"]
    (d / "meta.txt").write_text("\n".join(lines) + "\n")
    return meta


def read_meta(d: Path) -> Meta:
    kv = dict(line.split() for line in (d / "meta.txt").read_text().splitlines() if line.strip())
    return Meta(*(int(kv[k]) for k in "BTHKVC"), kv["dtype"], kv["gate"], kv["h0"] == "1", float(kv["scale"]))


def read_inputs(d: Path) -> tuple[Meta, KdaInputs]:
    """The inputs exactly as stored (q, k, v as rounded to the transfer type), back in fp32."""
    m = read_meta(d)
    dt = DTYPES[m.dtype]
    q = _load(d / "q.bin", (m.B, m.T, m.H, m.K), dt).float()
    k = _load(d / "k.bin", (m.B, m.T, m.H, m.K), dt).float()
    v = _load(d / "v.bin", (m.B, m.T, m.H, m.V), dt).float()
    g = _load(d / "g.bin", (m.B, m.T, m.H, m.K), torch.float32)
    if m.gate == "alpha":
        g = g.log()
    beta = _load(d / "beta.bin", (m.B, m.T, m.H), torch.float32)
    h0 = _load(d / "h0.bin", (m.B, m.H, m.K, m.V), torch.float32) if m.h0 else None
    return m, KdaInputs(q, k, v, g, beta, h0)


def read_outputs(out: Path, m: Meta) -> tuple[torch.Tensor, torch.Tensor]:
    return (_load(out / "o.bin", (m.B, m.T, m.H, m.V), torch.float32),
            _load(out / "ht.bin", (m.B, m.H, m.K, m.V), torch.float32))


# ---- host emulation: build and run ----

@dataclass(frozen=True)
class Build:
    runners: dict[str, Path]                  # "v3" -> kda_chunk_v3_emu
    faults: dict[str, dict[str, Path]]        # "v3" -> {"KDA_DROP_WAIT=3": its fault-injected runner}
    selftest: Path                            # ascendc_emu_selftest
    syncall: Path                             # microbench/syncall_latency.cpp on the emulation


def build(build_dir: Path, faults: tuple[str, ...] = (), jobs: int = 2,
          kernel_faults: dict[str, tuple[str, ...]] | None = None) -> Build:
    """cmake + build ascendc_stubs/ for the host: the emulator, its self-test, each kernel's runner and, per
    kernel, one variant per fault ("KDA_DROP_WAIT=3"): `faults` for every kernel, or a kernel's own list in
    `kernel_faults` ({"v5": ("KDA_DROP_WAIT=20",)}: v5 numbers its syncs per pass). Raises RuntimeError with the
    tool output when a step fails."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake not found")
    kernel_faults = kernel_faults or {}
    own = [f"-DKDA_FAULTS_{KERNELS[v]}={';'.join(fs)}" for v, fs in kernel_faults.items()]
    steps = ([cmake, "-S", str(HERE), "-B", str(build_dir), "-DRUN_MODE=host",
              f"-DKDA_FAULT_VARIANTS={';'.join(faults)}", *own],
             [cmake, "--build", str(build_dir), "-j", str(jobs)])
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    runners, variants = {}, {}
    for version, kernel in KERNELS.items():
        runners[version] = build_dir / kernel / f"{kernel}_emu"
        variants[version] = {}
        for f in kernel_faults.get(version, faults):
            name, value = f.split("=")
            variants[version][f] = build_dir / kernel / f"{kernel}_emu_{name.removeprefix('KDA_').lower()}{value}"
    return Build(runners, variants, build_dir / "host" / "ascendc_emu_selftest", build_dir / "syncall_latency_emu")


@dataclass
class EmuRun:
    returncode: int
    report: dict | None
    stderr: str


def capacity_options(profile) -> tuple[str, ...]:
    """The runner options that give the emulation a profile's core memories ([core] ub_kib, l1_kib, l0a_kib,
    l0b_kib, l0c_kib, per AIV / per AIC) instead of its A2 defaults; a capacity the profile leaves infinite is
    left at the default."""
    opts: list[str] = []
    for name in ("ub", "l1", "l0a", "l0b", "l0c"):
        kib = getattr(profile.core, f"{name}_kib")
        if math.isfinite(kib):
            opts += [f"--{name}-bytes", str(int(kib * 1024))]
    return tuple(opts)


# Phases whose tiles the kernel takes from the simulator's plan (--tiles), by kernel: "pass.phase" (v5) or "phase".
# The others, and why they do not follow the plan, are in README "Tiling of the real buffers".
KERNEL_TILED = {"kda_chunk_v3": ("A", "G"), "kda_chunk_v4": ("A", "G"),
                "kda_chunk_v5": ("intra.A", "state.A", "state.G", "state.F2"), "kda_chunk_v6": ("A", "G", "F2")}


def sim_plans(version: str, *, heads: int, chunks: int, dtype: str = "bf16", profile: str = "ascend-910b2",
              chunk_size: int = 64, d_k: int = 128, d_v: int = 128) -> dict[str, dict]:
    """The simulator's core-memory plan of every phase ("pass.phase" or "phase" -> PhasePlan.to_dict()): tiles,
    tile_shape, tile_bytes, capacity_bytes; {} where the design has no plan at this shape (a workspace error)."""
    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    from kda.studies.run_json import plans_json
    r = evaluate(version, Settings(heads=heads, chunks=chunks, dtype=dtype, profile=profile, chunk_size=chunk_size,
                                   d_k=d_k, d_v=d_v), timing=True)
    return {(f"{p['pass']}." if "pass" in p else "") + p["phase"]: p for p in plans_json(r)}


def tiles_option(kernel: str, plans: dict[str, dict]) -> tuple[str, ...]:
    """The runner's --tiles argument for the phases `kernel` tiles as the simulator plans them."""
    items = [f"{k}={plans[k]['tiles']}" for k in KERNEL_TILED.get(kernel, ()) if k in plans]
    return ("--tiles", ",".join(items)) if items else ()


def tile_attr(phase: str) -> str:
    """The operator attribute (kda_chunk_vN.json, op_host's OpDef) that carries a phase's tile count on the NPU:
    "state.A" -> "state_a_tiles", "G" -> "g_tiles"."""
    return phase.lower().replace(".", "_") + "_tiles"


def tile_attrs(kernel: str, plans: dict[str, dict]) -> dict[str, int]:
    """The operator attributes that make the CANN TilingFunc tile as the simulator plans: what tiles_option is to
    the host runner, for aclnnKdaChunkV3/V4/V5 (README "On real hardware")."""
    return {tile_attr(k): int(plans[k]["tiles"]) for k in KERNEL_TILED.get(kernel, ()) if k in plans}


def run(exe: Path, data: Path, out: Path, *, slots: int = 2, timeout_ms: int = 2000, aic: int = 24,
        extra: tuple[str, ...] = (), wall_timeout_s: float = 60.0, profile=None) -> EmuRun:
    """Run an emulated kernel; `extra`: kernel options (kda_chunk_v4: "--state-parts", "1"); `profile`: take
    UB, L1 and L0 capacities from its [core] table (the tiling plans UB with it, the emulation checks all)."""
    out.mkdir(parents=True, exist_ok=True)
    caps = capacity_options(profile) if profile is not None else ()
    p = subprocess.run([str(exe), "--data", str(data), "--out", str(out), "--slots", str(slots),
                        "--timeout-ms", str(timeout_ms), "--aic", str(aic), *caps, *extra],
                       capture_output=True, text=True, timeout=wall_timeout_s)
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return EmuRun(p.returncode, report, p.stderr)


# ---- what the simulator says ----

@dataclass(frozen=True)
class FlagOp:
    sync: int          # the simulator's sync number (1 = ①)
    op: str            # "set" or "wait"


def expected_flag_ops(graph: PhaseGraph) -> dict[str, list[FlagOp]]:
    """Per unit ("AIC" = Cube, "AIV" = each Vector sub-block), the flag operations of one chunk, in order:
    the producer of a sync sets its flag, the consumer waits on it."""
    ops: dict[str, list[FlagOp]] = {"AIC": [], "AIV": []}
    for s in graph.syncs:
        src, dst = s.direction.split("->")
        unit = {"cube": "AIC", "vec": "AIV"}
        ops[unit[src]].append(FlagOp(s.number, "set"))
        ops[unit[dst]].append(FlagOp(s.number, "wait"))
    return ops


def expected_payloads(graph: PhaseGraph, state_rides_on: int | None) -> dict[int, set[str]]:
    """Sync number -> the workspace tensors its producer publishes (the state as "S" where it rides)."""
    pay = {s.number: {p.name for p in s.payload} for s in graph.syncs}
    if state_rides_on is not None:
        pay[state_rides_on].add("S")
    return pay


def read_right_after(graph: PhaseGraph, sync: int, state_rides_on: int | None) -> set[str]:
    """The tensors sync n hands over that its consumer phase, the one right after the wait, reads. Without that
    wait they race; a tensor of the payload read only by a later phase may be ordered by a later wait instead
    (v4's A_qk_diag goes with ③ but is read in Phase F, after ⑤)."""
    s = next(s for s in graph.syncs if s.number == sync)
    read = {p.name for p in s.payload if s.consumer in graph.tensors[p.name].readers}
    if state_rides_on == sync and graph.state is not None and s.consumer in graph.state.readers:
        read.add("S")
    return read


def kernel_sync_bytes(report: dict, graph: PhaseGraph, state_rides_on: int | None) -> dict[int, int]:
    """Sync number -> the bytes the kernel's workspace tensors of that sync's payload (and the state, where it
    rides) take: the kernel's counterpart of the simulator's Sync.nbytes (+ the state's nbytes)."""
    sizes = report["tensor_bytes"]
    out = {s.number: sum(sizes[p.name] for p in s.payload) for s in graph.syncs}
    if state_rides_on is not None:
        out[state_rides_on] += sizes["S"]
    return out


def recorded_flag_ops(report: dict) -> dict[tuple[int, str, int], list[tuple[FlagOp, tuple[str, ...]]]]:
    """(block, unit, sub) -> that emulated core's flag events in order, flag ids mapped back to sync numbers,
    each with the workspace tensors a set published."""
    sync_of_flag = {flag: int(n) for n, flag in report["sync_flags"].items()}
    out: dict[tuple[int, str, int], list] = {}
    for e in report["events"]:
        key = (e["block"], e["unit"], e["sub"])
        out.setdefault(key, []).append((FlagOp(sync_of_flag.get(e["flag"], -1), e["op"]), tuple(e.get("wrote", ()))))
    return out


# ---- v5: several passes in one launch ----

STATE_HANDOFF = 0      # the sync number a state hand-off of its own gets (the simulator's node "S")


def expected_pass_flag_ops(tpl: Template) -> dict[str, list[FlagOp]]:
    """Per unit, the flag operations of one item (chunk) of one pass, in the order of the simulator's timed
    template: the producer of a sync sets its flag, the consumer waits on it; an own state hand-off (the node
    "S", FlagOp sync 0) likewise, where the template puts it: before the first reader on the other unit."""
    ops: dict[str, list[FlagOp]] = {"AIC": [], "AIV": []}
    unit = {"cube": "AIC", "vec": "AIV"}
    numbers = {s.name: s.number for s in tpl.graph.syncs}
    for node in tpl.nodes:
        if node.kind in (SYNC, STATE):
            src, dst = node.resource.removeprefix("link:").split("->")
            n = numbers[node.name] if node.kind == SYNC else STATE_HANDOFF
            ops[unit[src]].append(FlagOp(n, "set"))
            ops[unit[dst]].append(FlagOp(n, "wait"))
    return ops


def by_chunk(ops: list[FlagOp]) -> list[list[FlagOp]]:
    """A unit's flag operations over its chunks, split per chunk: the k-th operation on sync n belongs to the
    k-th chunk (each chunk sets or waits on every sync once), kept in the order the unit ran them."""
    seen: dict[tuple[int, str], int] = {}
    chunks: list[list[FlagOp]] = []
    for op in ops:
        k = seen.get((op.sync, op.op), 0)
        seen[(op.sync, op.op)] = k + 1
        while len(chunks) <= k:
            chunks.append([])
        chunks[k].append(op)
    return chunks


def expected_pass_payloads(tpl: Template) -> dict[int, set[str]]:
    """Sync number -> the workspace tensors its producer publishes; an own state hand-off (0) publishes "S"."""
    pay = {s.number: {p.name for p in s.payload} for s in tpl.graph.syncs}
    if tpl.state_mode == "own":
        pay[STATE_HANDOFF] = {"S"}
    return pay


def recorded_pass_flag_ops(report: dict, passes: tuple[str, ...]) -> dict[tuple[int, str, int], dict[str, list]]:
    """(block, unit, sub) -> pass name -> that emulated core's flag events of the pass, in order, as (FlagOp,
    wrote). The passes are told apart by the all-core barriers between them (report "pass_flags": per pass,
    sync number -> flag id; the passes may reuse ids)."""
    out: dict[tuple[int, str, int], dict[str, list]] = {}
    for e in report["events"]:
        key = (e["block"], e["unit"], e["sub"])
        per_pass = out.setdefault(key, {p: [] for p in passes})
        at = per_pass.setdefault("_at", 0)
        if e["op"] == "syncall":
            per_pass["_at"] = at + 1
            continue
        name = passes[at]
        sync_of_flag = {flag: int(n) for n, flag in report["pass_flags"][name].items()}
        per_pass[name].append((FlagOp(sync_of_flag.get(e["flag"], -1), e["op"]), tuple(e.get("wrote", ()))))
    for per_pass in out.values():
        per_pass.pop("_at", None)
    return out
