"""Measured kernels as the simulator models them: a kernel name and a shape -> predicted latency on a profile.

Kernel names are `<gate>_<design>`: gate `kda` (one decay per key channel) or `gdn` (Gated DeltaNet, one
decay per head: the fused designs v1-v4 with g broadcast over the channels, so the gate's Vector work
shrinks from C x d_k to C values per chunk, and `gdn_fla`, FLA's GDN decomposition, kda/kernels/gdn.py);
design one of kda/programs. The measured MegaGDN kernels: `gdn_pto`, `gdn_pto_fused` (kda/kernels/pto.py) and
`gdn_triton64` / `gdn_triton128` (vllm-ascend's Triton kernels, kda/kernels/triton.py), one stage a pass
or, for a stage of several launches, passes named `stage:part`. The measured KDA kernels: `kda_fla_npu`
(flash-linear-attention-npu's AscendC ChunkKdaFwd, kda/kernels/fla_npu.py), `kda_fla_npu_intra` (its
ChunkKdaFwdIntraSubChunk, kda/kernels/fla_npu_intra.py) and that kernel's earlier builds
`kda_fla_npu_intra_<step>` (fla_npu_intra_history.py). A measured KDA kernel's rows are validation only
(`held_out`): no fit may see them. A shape is written `BxTxHxKxV` (simple CSV; T may list a variable-length
batch, `1x65+129x32x128x128`, as FLA's cu_seqlens) or as msprof's Input Shapes `q;k;v;g;beta`
(q [B, T, Hg, K], v [B, T, H, V]). Hg (grouped q/k heads) is not modelled apart: every value head
reads its own q and k.
The latency is the kernel's pipelined makespan plus the profile's launch overhead, what msprof's Task
Duration measures for one kernel; for a design that declares its wrappers (`host`), the timed region
around them as its benchmark times it (npusim/model/host.py).

npusim.fit.calibrate and kda.studies.validate read kernels through `resolve`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from npusim import simulate
from npusim.chip.profile import Profile
from npusim.fit.measurements import Measurement, MeasurementError
from npusim.model.host import timed_region
from npusim.model.limits import (
    MAX_REPLAYS,
    MAX_SEQUENCES,
    LimitError,
    check,
    check_chunk,
    check_predictions,
    replay_bound,
)
from npusim.model.multipass import simulate_design, templates
from npusim.model.template import RIDE
from npusim.model.whatif import DesignTimer
from npusim.record.precision import Precision

from kda.driver.execute import program_default_state, record_graphs
from kda.kernels import fla_npu
from kda.kernels.fla_npu_intra_history import INTRA_SUB_CHUNK
from kda.kernels.gdn import GDN_FLA
from kda.kernels.pto import GDN_PTO, GDN_PTO_FUSED
from kda.kernels.recording import record_kernel
from kda.kernels.triton import GDN_TRITON
from kda.programs import DESIGNS, PROGRAMS, user

if TYPE_CHECKING:
    from npusim.model.schedule import Design

    from kda.kernels.decode import DecodeKernelModel


def _designs() -> dict:
    """Kernel name -> (design, gate width: None per channel, 1 per head)."""
    out: dict[str, tuple[Design, int | None]] = {f"kda_{name}": (d, None) for name, d in DESIGNS.items()}
    out.update({f"gdn_{name}": (DESIGNS[name], 1) for name in PROGRAMS})
    out["gdn_fla"] = (GDN_FLA, 1)
    out["gdn_triton64"] = out["gdn_triton128"] = (GDN_TRITON, 1)     # the chunk comes with the shape (C=)
    out["gdn_pto"] = (GDN_PTO, 1)
    out["gdn_pto_fused"] = (GDN_PTO_FUSED, 1)
    out.update({name: (k.design, None) for name, k in LAID_OUT.items()})
    out["kda_fla_npu"] = (fla_npu.FLA_NPU, None)
    return out


# Kernels that lay their work out themselves and record their own inputs (`items`, `record`): flash-linear-
# attention-npu's ChunkKdaFwdIntraSubChunk, a window of two heads an item, one task a chunk.
LAID_OUT = {f"kda_fla_npu_intra{'' if step == 'shipped' else '_' + step}": k for step, k in INTRA_SUB_CHUNK.items()}
KERNELS = _designs()
# The paths a measured kernel's model reads (chunk C, key and value widths): other shapes tile differently.
PATHS = {"kda_fla_npu": fla_npu.SHAPES}
# Other names for the same kernels: a bare design (`v3`, as ascendc_stubs/scripts/op_summary_to_csv.py writes
# it) and the AscendC skeletons' operator types (the OP Type msprof records).
ALIASES = {**{name: f"kda_{name}" for name in DESIGNS},
           **{f"KdaChunk{name.upper()}": f"kda_{name}" for name in ("v3", "v4", "v5")}}


def stage_of(pass_name: str) -> str:
    """The measured stage a pass belongs to: a stage of several kernels names them `stage:part`."""
    return pass_name.split(":", 1)[0]


def kernel_names() -> list[str]:
    from kda.kernels.decode import DECODE_KERNELS
    return list(KERNELS) + list(DECODE_KERNELS)


def held_out(kernel: str) -> bool:
    """Whether `kernel` models a measured KDA kernel (a `kda_` kernel that is not one of this project's
    designs, nor one from outside the package): its rows are validation only, never a fit's."""
    kernel = ALIASES.get(kernel, kernel)
    return kernel.startswith("kda_") and kernel in KERNELS and kernel[len("kda_"):] not in DESIGNS


def kernel_design(kernel: str) -> tuple | None:
    """(design, gate width) of a kernel name: KERNELS', or `kda_<name>` of a design from outside the package
    (kda/programs/user.py: registered, or an installed package's entry point); None for an unknown name."""
    if kernel in KERNELS:
        return KERNELS[kernel]
    name = user.resolve(kernel[len("kda_"):], DESIGNS) if kernel.startswith("kda_") else None
    return None if name is None else (user.REGISTERED[name], None)


@dataclass(frozen=True)
class KernelShape:
    batch: int
    seqlens: tuple[int, ...]  # tokens of each sequence: (T,) for a fixed length, several for FLA's varlen
    heads: int               # value heads: one state per (sequence, head)
    d_k: int
    d_v: int
    q_heads: int = 0         # grouped q/k heads (Hg); 0: as many as value heads

    @property
    def tokens(self) -> int:
        return sum(self.seqlens)

    def chunk_counts(self, chunk_size: int) -> list[int]:
        """Chunks of every (sequence, head), sequence-major as the drivers flatten them."""
        lengths = self.seqlens * self.batch
        return [math.ceil(n / chunk_size) for n in lengths for _ in range(self.heads)]

    def text(self) -> str:
        return f"{self.batch}x{'+'.join(map(str, self.seqlens))}x{self.heads}x{self.d_k}x{self.d_v}"


def parse_shape(text: str, form: str = "simple") -> tuple[KernelShape, int]:
    """(shape, chunk size) from '1x4096x32x128x128', 'B=1;T=4096;H=32;K=128;V=128;C=64' or msprof's
    '1,4096,16,128;1,4096,16,128;1,4096,32,128;...'; ValueError says why. The chunk size is 64 unless given."""
    C = 64
    try:
        if form == "simple" and "=" in text:
            kv = dict(item.split("=", 1) for item in text.replace(" ", "").split(";") if item)
            if not {"B", "T", "H", "K", "V"} <= set(kv):
                raise ValueError
            seqlens = tuple(int(x) for x in kv["T"].split("+"))
            B, H, K, V = (int(kv[k]) for k in "BHKV")
            Hg = int(kv.get("Hg", H))
            C = int(kv.get("C", 64))
            T = min(seqlens + (C,))
        elif form == "msprof":
            parts = [[int(x) for x in p.split(",") if x.strip()] for p in text.split(";")]
            if len(parts) < 3 or len(parts[0]) != 4 or len(parts[2]) != 4:
                raise ValueError
            (B, T, Hg, K), (_, _, H, V) = parts[0], parts[2]
            seqlens = (T,)
        else:
            fields = text.lower().split("x")
            if len(fields) != 5:
                raise ValueError
            seqlens = tuple(int(x) for x in fields[1].split("+"))
            B, H, K, V = (int(fields[i]) for i in (0, 2, 3, 4))
            Hg = H
            T = min(seqlens)
    except ValueError:
        want = ("q;k;v;... with q [B,T,Hg,K] and v [B,T,H,V]" if form == "msprof" else
                "BxTxHxKxV (e.g. 1x4096x32x128x128) or B=..;T=..;H=..;K=..;V=..[;C=..]")
        raise ValueError(f"shape {text!r} is not {want}") from None
    if min(B, T, H, K, V, Hg) < 1:
        raise ValueError(f"shape {text!r}: every dimension must be >= 1")
    if H % Hg:
        raise ValueError(f"shape {text!r}: H = {H} value heads is not a multiple of Hg = {Hg} q/k heads")
    if len(seqlens) > 1 and B != 1:
        raise ValueError(f"shape {text!r}: a variable-length batch (T = a+b+...) needs B = 1, as FLA's cu_seqlens")
    return KernelShape(B, seqlens, H, K, V, Hg), C


@lru_cache(maxsize=64)
def _graphs(kernel: str, chunk_size: int, d_k: int, d_v: int, dtype: str, heads: int):
    design, width = kernel_design(kernel) or KERNELS[kernel]
    if kernel in LAID_OUT:
        return tuple(LAID_OUT[kernel].record(dtype, d_k))
    if any(p.all_heads for p in design.passes) or design.notes.get("gate") == "channel":
        # a pass over [C, H] tiles (recorded for these heads), or a KDA kernel's stages
        return tuple(record_kernel(design, chunk_size, d_k, d_v, dtype, heads))
    state_program = (design.state_pass or design.passes[0]).program
    precision = Precision(dtype, {}, state=program_default_state(state_program, dtype))
    graphs, _ = record_graphs(design, chunk_size=chunk_size, d_k=d_k, d_v=d_v, precision=precision,
                              gate_width=width)
    return tuple(graphs)


@dataclass(frozen=True)
class KernelModel:
    name: str
    shape: KernelShape
    dtype: str
    chunk_size: int = 64
    stage: str = ""          # one stage (its pass or passes) of a design of several, or "" for the whole design

    @property
    def design(self):
        return (kernel_design(self.name) or KERNELS[self.name])[0]

    def predict(self, profile: Profile) -> float:
        """Latency in us of the kernel on `profile` (timing only, the graphs recorded once): the makespan
        of every pass plus a launch (or barrier) before each; with a `stage`, that stage's passes alone (their
        own launches and makespans, as NPU events around one stage's kernels time them). A design that
        declares its wrappers (`host`): the timed region around them."""
        return self.around(self.kernel_us(profile), profile)

    def timed(self):
        """(design, graphs) the prediction replays: the kernel's, or its stage's passes alone."""
        heads = self.shape.heads
        graphs = _graphs(self.name, self.chunk_size, self.shape.d_k, self.shape.d_v, self.dtype,
                         heads if any(p.all_heads for p in self.design.passes) else 0)
        design, graphs = self.design, list(graphs)
        if self.stage:                       # that stage's passes alone (its kernels: `stage` or `stage:part`)
            idx = [i for i, p in enumerate(design.passes) if stage_of(p.name) == self.stage]
            design, graphs = replace(design, passes=tuple(design.passes[i] for i in idx)), [graphs[i] for i in idx]
        return design, graphs

    def predict_many(self, profiles: list[Profile]) -> list[float]:
        """predict() for each of `profiles` (the first recorded, the others timed from it at once:
        npusim/model/whatif/); the same numbers as predict() one by one."""
        design, graphs = self.timed()
        timer = DesignTimer(design, graphs, profiles[0], self.counts(),
                            state_handoff=RIDE, heads=self.shape.heads)
        got = timer.time(profiles, serial=False, bound=False)
        if got.errors:
            raise MeasurementError(f"{self.name} {self.stage}: {next(iter(got.errors.values()))}")
        out = []
        for i, p in enumerate(profiles):
            kernel = {name: float(v[i]) for name, v in got.pass_us.items()}
            kernel[""] = float(got.latency_us[i])
            out.append(self.around(kernel, p))
        return out

    def counts(self) -> list[int]:
        """The work items of each sequence (its chunks), or of each task for a kernel that lays its work out
        itself (LAID_OUT)."""
        s = self.shape
        if self.name in LAID_OUT:
            return LAID_OUT[self.name].items(s.batch, s.seqlens, s.heads, self.chunk_size)
        return s.chunk_counts(self.chunk_size)

    def kernel_us(self, profile: Profile) -> dict[str, float]:
        """The device's part: each pass's launch (or barrier) and makespan by pass name, "" all of them."""
        heads = self.shape.heads
        design, graphs = self.timed()
        tpls = templates(design, graphs, profile, RIDE)   # a pass may declare its own state hand-off
        check(f"{self.name} {self.shape.text()}: chunks replayed on the busiest core",
              self.replays(profile.chip.ai_cores), MAX_REPLAYS)          # before the sequences are listed
        counts = self.counts()
        if self.design.single:
            uniform = len(set(counts)) == 1
            run = simulate(tpls[0], design.passes[0].on(profile), chunks=counts[0] if uniform else counts,
                           sequences=len(counts), trace=False)
            return {"": run.latency_us}
        run = simulate_design(design, tpls, profile, counts, trace=False, heads=heads)
        return {**{p.pass_.name: p.boundary_us + p.run.makespan_us for p in run.passes}, "": run.latency_us}

    def around(self, kernel_us: dict[str, float], profile: Profile) -> float:
        """The timed region around the kernels of `kernel_us` (their sum where the design declares no host)."""
        host = self.design.host
        if host is None:
            return kernel_us[""]
        return timed_region(host, self.stage, kernel_us, self.dims(), profile)

    @property
    def sequences(self) -> int:
        """(sequence, head) pairs: each a state, laid out over the cores."""
        return self.shape.batch * len(self.shape.seqlens) * self.shape.heads

    def replays(self, cores: int) -> int:
        """Chunks one prediction replays on its busiest core, at most (every pass), worked out without
        listing the sequences: what limits.py weighs before a prediction runs."""
        s = self.shape
        passes = len(self.design.passes) if not self.stage else 1
        if self.name in LAID_OUT:                    # its tasks, as counts() lists them
            return passes * replay_bound(*LAID_OUT[self.name].task_bound(s.batch, s.seqlens, s.heads,
                                                                          self.chunk_size), cores)
        return passes * replay_bound(self.sequences, -(-max(s.seqlens) // self.chunk_size), cores)

    def dims(self) -> dict[str, float]:
        """The dimensions a wrapper's sizes name (npusim/model/host.py)."""
        s = self.shape
        return {"T": s.batch * s.tokens, "H": s.heads, "C": self.chunk_size, "K": s.d_k, "V": s.d_v,
                "NC": sum(s.chunk_counts(self.chunk_size)) / s.heads, "N": s.batch * len(s.seqlens)}


def model(kernel: str, shape: str, dtype: str, form: str = "simple",
          stage: str = "") -> KernelModel | DecodeKernelModel:
    """ValueError naming the kernel, stage or shape when it cannot be modelled. Decode kernels (one step of the
    recurrence) are kda/kernels/decode.py's, with their own shapes."""
    from kda.kernels.decode import DECODE_KERNELS, decode_model
    kernel = ALIASES.get(kernel, kernel)
    if kernel in DECODE_KERNELS:
        return decode_model(kernel, shape, dtype, stage)
    found = kernel_design(kernel)
    if found is None:
        raise ValueError(f"unknown kernel {kernel!r} (known: {', '.join(kernel_names())}, or kda_<name> of a "
                         f"design from your file: kda.validate --version path.py:NAME)")
    passes = list(dict.fromkeys(stage_of(p.name) for p in found[0].passes))
    if stage and stage not in passes:
        raise ValueError(f"kernel {kernel} has no stage {stage!r} (its stages: {', '.join(passes)})")
    parsed, chunk_size = parse_shape(shape, form)
    if kernel in LAID_OUT:
        LAID_OUT[kernel].check(parsed.d_k, chunk_size, parsed.q_heads not in (0, parsed.heads))
    path = PATHS.get(kernel)
    if path is not None:
        have = {"C": chunk_size, "K": parsed.d_k, "V": parsed.d_v}
        off = [f"{k} = {have[k]}" for k in path if have[k] != path[k]]
        if off or parsed.q_heads != parsed.heads:
            want = ", ".join(f"{k} = {v}" for k, v in path.items())
            raise ValueError(f"kernel {kernel} is modelled on its {want} path, one q/k head per value head; "
                             f"shape {shape!r} has {', '.join(off) or 'grouped q/k heads'}")
    m = KernelModel(kernel, parsed, dtype, chunk_size, stage)
    check_chunk(chunk_size, parsed.d_k, parsed.d_v, parsed.heads if any(p.all_heads for p in m.design.passes)
                else 1, f"{kernel} {shape}: one chunk")
    check(f"{kernel} {shape}: sequences x heads", m.sequences, MAX_SEQUENCES)
    return m


def check_models(models, profile: Profile, predictions: int, what: str) -> None:
    """LimitError (one line) before a tool predicts every model `predictions` times on `profile`: a model whose
    one prediction replays too much, or all of them together (npusim/model/limits.py)."""
    total = 0
    for m in models:
        if not hasattr(m, "replays"):        # a model that is not one of these (a test's stand-in)
            continue
        n = m.replays(profile.chip.ai_cores)
        check(f"{m.name} {m.shape.text()}: chunks replayed on the busiest core", n, MAX_REPLAYS)
        total += n
    check_predictions(what, total, predictions)


def resolve(m: Measurement) -> KernelModel | DecodeKernelModel:
    """The model of a measured row; MeasurementError naming the row otherwise (a shape beyond this model's
    limits included)."""
    try:
        return model(m.kernel, m.shape, m.dtype, m.form, getattr(m, "stage", ""))
    except (ValueError, LimitError) as err:
        raise MeasurementError(f"{m.where()}: {err}") from None
