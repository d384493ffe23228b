"""The two analyses of benchmarks/designs.py that explain its ranking: what moved it (each mechanism of the
calibrated chip switched off in turn; per-chunk busy time by unit and by phase; the critical path), and
the designs per token-head beside the measured 910B2 kernels and the model's prediction for them."""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from npusim.fit.uncertainty import interval, sample_profiles, sample_values
from npusim.model.multipass import templates
from npusim.output.overlap import analyse

from kda.kernels.registry import model
from kda.programs import DESIGNS
from kda.settings import Settings
from kda.studies.evaluate import evaluate, retime
from kda.studies.probe import why_unsafe
from kda.studies.timing import time_profiles
from kda.studies.uncertainty import design_fields
from kda.views.table import markdown

ROOT = Path(__file__).resolve().parent.parent
MEGAGDN = ROOT / "kda" / "validation" / "megagdn.csv"
VEC_ONE = dict(isa__vec_binary_cycles=1.0, isa__vec_exp_cycles=1.0, isa__vec_div_cycles=1.0,
               isa__vec_reduce_cycles=1.0)
FREE_CUBE_MOVES = dict(isa__fixpipe_min_cycles=0.0, isa__fixpipe_bytes_per_cycle=1e6, isa__mte1_fixed_cycles=0.0,
                       isa__mte1_l0a_bytes_per_cycle=1e6, isa__mte1_l0b_bytes_per_cycle=1e6)
NO_COPY_T0 = dict(isa__gm_l1_fixed_cycles=0.0, isa__gm_ub_fixed_cycles=0.0, isa__ub_gm_fixed_cycles=0.0)
# what is switched off (on the calibrated profile), as `--set` flags
ABLATIONS = [
    ("as calibrated", "", {}),
    ("dependent-instruction wait off", "--set isa.vec_dependent_cycles=0", dict(isa__vec_dependent_cycles=0.0)),
    ("every Vector op 1 cycle per 256-B repeat", "--set isa.vec_{binary,exp,div,reduce}_cycles=1", VEC_ONE),
    ("strided-row cost off", "--set isa.gm_burst_cycles=0", dict(isa__gm_burst_cycles=0.0)),
    ("DataCopy fixed cost off", "--set isa.{gm_l1,gm_ub,ub_gm}_fixed_cycles=0", NO_COPY_T0),
    ("MTE1 and FixPipe free (matmul operand loads, drain)", "--set isa.fixpipe_min_cycles=0 ...", FREE_CUBE_MOVES),
    ("sync latency at its low end", "--set sync.latency_us=0.1", dict(sync__latency_us=0.1)),
    ("sync latency at its high end", "--set sync.latency_us=5", dict(sync__latency_us=5.0)),
]
UNCALIBRATED = "`[isa]` off: ascend-910b2-uncalibrated"
TRACED = ("v3", "v6")        # the two fastest one-pass designs: their critical paths
TRACE_TOKENS = 16384         # traced at 32 heads x 16384 tokens: the Kimi layer's steady state, an eighth of its events


def ms(r) -> float:
    """A design's layer latency in ms."""
    return r.design_report.latency_us / 1e3


def _plans(r, profile) -> list[tuple]:
    """(pass name, plan) of every phase of the design's passes on `profile` ("" for a one-pass design): the
    cost model's plans, which a replay's templates carry (kda/studies/run_json.py plans_of), without the replay."""
    tpls = templates(r.design, r.execution.pass_graphs, profile, r.settings.state_handoff, r.settings.capacity)
    single = len(tpls) == 1
    return [("" if single else p.name, plan) for p, tpl in zip(r.design.passes, tpls) for plan in tpl.plans]


def _busy(r, profile) -> dict[str, float]:
    """Busy us per (sequence, chunk) item by unit, summed over the design's phases and passes."""
    out = defaultdict(float)
    for _, plan in _plans(r, profile):
        out[plan.unit] += plan.busy_us
    return out


def _phases(r, profile) -> dict[tuple[str, str], dict]:
    return {(pn, pl.phase): pl.to_dict() for pn, pl in _plans(r, profile)}


def ablation_ms(il2: dict, cal, unc) -> dict[str, dict[str, float]]:
    """Label -> design -> layer latency (ms) with each ABLATION on the calibrated profile (a design's all at once,
    by the compiled event model: kda/studies/timing.py time_profiles), and on the uncalibrated profile."""
    labels = [label for label, _, _ in ABLATIONS]
    profiles = [cal.replace(**changes) if changes else cal for _, _, changes in ABLATIONS]
    out: dict[str, dict[str, float]] = {label: {} for label in labels + [UNCALIBRATED]}
    for v, r in il2.items():
        t = time_profiles(r, profiles, serial=False, bound=False)
        if t.errors:
            raise ValueError(f"{v}: {next(iter(t.errors.values()))}")
        for label, us in zip(labels, t.latency_us):
            out[label][v] = float(us) / 1e3
        out[UNCALIBRATED][v] = ms(retime(r, unc, compiled=True))
    return out


def mechanisms(recs: dict, shape: dict, cal, unc) -> list[str]:
    """What moves each design on the Kimi layer (interleave 2): the ablations, the busy times, the paths."""
    il2 = {v: recs[v, 2] for v in DESIGNS}
    out = ["## What moved the ranking (Kimi layer, interleave 2)", "",
           "Each mechanism of the calibrated chip switched off alone (`python -m kda.run --version all "
           "--no-numerics --heads 32 --tokens 131072 --interleave 2 SET`), and the uncalibrated profile "
           "(`--profile ascend-910b2-uncalibrated`: the same chip without `[isa]`). Layer latency, ms. Switches "
           "interact and the list scheduler is greedy: one that removes cost can lengthen a design's schedule "
           "(a design whose column rises).", ""]
    safe = {v for v, r in il2.items() if why_unsafe(r) is None}       # the ranking column: these only
    if len(safe) < len(DESIGNS):
        out[-2] += (f" The ranking column holds only the designs that stay finite on gates "
                    f"{next(iter(il2.values())).settings.gates} (not {', '.join(v for v in DESIGNS if v not in safe)}).")
    cells, timed = [], ablation_ms(il2, cal, unc)
    for label, flags, _ in ABLATIONS + [(UNCALIBRATED, "--profile ...", None)]:
        t = timed[label]
        cells.append((label, f"`{flags}`" if flags.startswith("--set") else "", *(f"{t[v]:,.1f}" for v in DESIGNS),
                      " < ".join(sorted((v for v in t if v in safe), key=t.get))))
    out += [markdown(cells, ("switched off", "flags", *DESIGNS, "ranking")), ""]
    nodep = cal.replace(**dict(ABLATIONS[1][2]))
    freecube = cal.replace(**FREE_CUBE_MOVES)
    rows = []
    for v, r in il2.items():
        bc, bu, bn, bf = _busy(r, cal), _busy(r, unc), _busy(r, nodep), _busy(r, freecube)
        rows.append((v, f"{bu['vec']:.2f}", f"{bc['vec']:.2f}", f"{(bc['vec'] - bn['vec']) / bc['vec']:.0%}",
                     f"{bu['cube']:.2f}", f"{bc['cube']:.2f}", f"{(bc['cube'] - bf['cube']) / bc['cube']:.0%}"))
    out += ["Busy time per (sequence, chunk) item, us, summed over the design's phases and passes (each phase's "
            "busy time on its unit: loads, compute and stores as its buffers overlap them; `--json`: `memory[].busy_us`).",
            "", markdown(rows, ("design", "Vector, uncalibrated", "Vector, calibrated", "of it the dependent wait",
                                "Cube, uncalibrated", "Cube, calibrated", "of it MTE1 + FixPipe")), ""]
    out += _phase_table(il2, (cal, unc, nodep), ("v3", "v6", "v4"))
    out += _critical(shape, cal, unc)
    return out


def _phase_table(il2: dict, profiles: tuple, designs) -> list[str]:
    """Each phase's busy time on the calibrated and the uncalibrated profile and with the dependent wait off."""
    cal, unc, nodep = profiles
    rows = []
    for v in designs:
        pc, pu, pn = _phases(il2[v], cal), _phases(il2[v], unc), _phases(il2[v], nodep)
        for key, d in pc.items():
            rows.append((v, d["phase"], d["unit"], f"{pu[key]['busy_us']:.2f}", f"{d['busy_us']:.2f}",
                         f"{d['load_us']:.2f}", f"{d['compute_us']:.2f}", f"{pn[key]['busy_us']:.2f}"))
    return ["Per phase, us per chunk (`python -m kda.run --version v6 --no-numerics --heads 32 --tokens 131072 "
            "--interleave 2 --json`, `memory[]`):", "",
            markdown(rows, ("design", "phase", "unit", "busy, uncalibrated", "busy, calibrated", "of it loads",
                            "of it compute", "busy, dependent wait off")), ""]


def _critical(shape: dict, cal, unc) -> list[str]:
    rows = []
    for v in TRACED:
        r = evaluate(v, Settings(numerics=False, keep_trace=True, interleave=2, **{**shape, "tokens": TRACE_TOKENS}))
        for name, prof in (("calibrated", cal), ("uncalibrated", unc)):
            crit = analyse(retime(r, prof).pipelined).critical
            total = crit.length_us
            rows.append((v, name, f"{total / 1e3:,.2f}", *(f"{crit.by_kind.get(k, 0.0) / total:.0%}"
                                                          for k in ("vec", "cube", "sync latency", "sync transfer", "wait"))))
    return [f"Critical path of the pipelined run, shares of its length, at {TRACE_TOKENS} tokens (an eighth of the "
            "layer's events, the same steady state; `python -m kda.run --version v3 --no-numerics --heads 32 "
            f"--tokens {TRACE_TOKENS} --interleave 2 --json`, `pipeline.overlap.critical`):", "",
            markdown(rows, ("design", "profile", "length ms", "Vector", "Cube", "sync latency", "sync transfer", "wait")), ""]


def _measured() -> list[dict]:
    with MEGAGDN.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _kernel_groups(rows: list[dict]) -> list[tuple[str, list[dict], str]]:
    """(label, rows summed, what): MegaGDN's fused kernel at H = 32 (L = 8192 fitted on, 16384 held out),
    its six staged PTO kernels and vllm-ascend's six Triton (chunk 64) stages, at the largest L with all six."""
    def stages(kernel, L):
        return [r for r in rows if r["kernel"] == kernel and f"T={L};H=32;" in r["shape"]]
    out = []
    for L in (8192, 16384):
        fused = stages("gdn_pto_fused", L)
        out.append((f"MegaGDN fused, 16 x {L} x 32", fused, "one launch"))
    for kernel, label in (("gdn_pto", "MegaGDN staged PTO (chunk 128)"), ("gdn_triton64", "vllm-ascend Triton (chunk 64)")):
        L = max(L for L in (4096, 8192, 16384) if len(stages(kernel, L)) == 6)
        out.append((f"{label}, 16 x {L} x 32", stages(kernel, L), "sum of six launches"))
    return out


def kernel_rows(cal, samples: int, seed: int) -> dict:
    """The measured kernels and the model's prediction for each, nominal and over the sampled profiles."""
    fields = design_fields(cal)          # as propagate draws them, so that sample i pairs with the designs' i
    profiles = sample_profiles(cal, fields, sample_values(fields, samples, seed))
    rows, fused_ns, best = [], None, (float("inf"), "")
    for label, group, what in _kernel_groups(_measured()):
        th = 16 * int(group[0]["shape"].split("T=")[1].split(";")[0]) * 32
        models = [model(r["kernel"], r["shape"], r["dtype"], stage=r["stage"]) for r in group]
        measured = sum(float(r["measured_us"]) for r in group)
        each = [m.predict_many([cal] + profiles) for m in models]    # nominal, then the samples, at once
        nominal = sum(x[0] for x in each)
        sampled = np.array([sum(x[i] for x in each) for i in range(1, len(profiles) + 1)])
        iv = interval(sampled * 1e3 / th, nominal * 1e3 / th)
        held = "held out" if all(r["held_out"] == "yes" for r in group) else "fitted on"
        rows.append((label, what, held, f"{measured / 1e3:,.2f}", f"{measured * 1e3 / th:.2f}",
                     f"{iv.nominal:.2f}", f"{iv.median:.2f} [{iv.lo:.2f}, {iv.hi:.2f}]", f"{nominal / measured - 1:+.0%}"))
        if fused_ns is None:
            fused_ns = sampled * 1e3 / th
        best = min(best, (measured * 1e3 / th, label))
    for kernel in ("gdn_v3", "gdn_v6"):
        m = model(kernel, "B=16;T=8192;H=32;K=128;V=128;C=64", "bf16")
        th = 16 * 8192 * 32
        each = m.predict_many([cal] + profiles)
        sampled = np.array(each[1:]) * 1e3 / th
        iv = interval(sampled, each[0] * 1e3 / th)
        rows.append((f"GDN in design {kernel[4:]}'s structure, 16 x 8192 x 32 (`{kernel}`)", "model only", "",
                     "", "", f"{iv.nominal:.2f}", f"{iv.median:.2f} [{iv.lo:.2f}, {iv.hi:.2f}]", ""))
    return dict(rows=rows, fused_ns=fused_ns, best=best)


def per_token_head(kernels: dict, kimi_u, kimi_th: int, meg_u, meg_th, samples: int) -> list[str]:
    rows, fused_ns, best = kernels["rows"], kernels["fused_ns"], kernels["best"]
    out = ["## Per token-head: the designs beside the measured 910B2 kernels", "",
           "Measured: `kda/validation/megagdn.csv` (NPU events, 16 sequences, 32 value heads, Hg = 16, K = V = 128; "
           "the fused row includes its buffers' zero-fills and a D2H sync, each Triton stage its Python wrapper). "
           "Model: `kda.kernels` on the calibrated chip (`python -m kda.validate`), nominal and over the same "
           f"{samples} sampled profiles. ns per token-head = latency / (sequences x tokens x heads).", "",
           markdown(rows, ("kernel", "timed", "rows", "measured ms", "measured ns", "model ns",
                           "model ns: median [90 %]", "model error")), ""]
    cells = []
    for tag, u, th in (("Kimi layer", kimi_u, kimi_th), ("16 x 8192 x 32", meg_u, meg_th)):
        if u is None:
            continue
        for v in sorted(u.versions, key=lambda v: (v in u.apart, u.interval(v).median)):   # the safe first
            ns = u.latencies[v]["pipelined"] * 1e3 / th
            iv = interval(ns, u.nominal[v]["pipelined"] * 1e3 / th)
            cells.append((v, tag, "yes" if v not in u.apart else f"no: {u.apart[v]}", f"{iv.nominal:.2f}",
                          f"{iv.median:.2f} [{iv.lo:.2f}, {iv.hi:.2f}]",
                          f"{np.mean(ns < best[0]):.0%}", f"{np.mean(ns < fused_ns):.0%}"))
    out += [f"KDA designs, ns per token-head (each at its better interleave; best measured: {best[1]}, "
            f"{best[0]:.2f} ns); the designs that overflow on the run's gates last, never counted as an answer:", "",
            markdown(cells, ("design", "shape", "finite on the run's gates", "nominal ns", "median [90 %]", "samples below the best measured",
                             "samples below the model's fused MegaGDN (same sample)")), ""]
    best_design = min((v for v in kimi_u.versions if v not in kimi_u.apart), key=lambda v: kimi_u.interval(v).median)
    med = kimi_u.interval(best_design).median * 1e3 / kimi_th
    if med < best[0]:
        out.append(f"The fastest KDA design that stays finite on the Kimi layer, {best_design}, predicts {med:.2f} ns per token-head "
                   f"(median), below the best measured kernel ({best[0]:.2f} ns).")
    else:
        out.append(f"No KDA design predicts below the best measured kernel ({best[0]:.2f} ns): the fastest, "
                   f"{best_design}, is at {med:.2f} ns; its critical path is in the table above.")
    return out + [""]
