"""The JSON of `kda-run --json`: one shape for every design, one pass or six (kda/schema/run.schema.json).

    schema_version   SCHEMA_VERSION; bumped when a key moves or changes meaning
    version, chunks, tokens, batch, heads, ...       the settings of the run
    layer      the whole layer on the chip, for every design: latency, serial, bound, HBM floor,
               efficiency, roofline, hand-offs per chunk over all passes, launches, barriers, HBM bytes,
               and each pass (null when the run has no timing: a workspace or capacity error)
    pipeline   a one-pass design's pipelined run in detail: the latency's parts, utilisation, per-phase
               times, the state hand-off, overlap (null for designs of several passes)
    programs   the phase program of each pass, per chunk: its syncs, their bytes and tensors, MACs
    parity, errors, overflow, precision, attribution, memory, workspace_error, capacity_error
    probe      a timing-only run: the design's numerics on a few chunks of the run's gates (finite, or where
               inf/NaN first appears); null with numerics (the run's own `overflow` says it)
    safe       stays finite on the run's gates: by the run's numerics, else by its probe; null: not checked

"Syncs per chunk" has one meaning everywhere: the cross-core hand-offs one (sequence, chunk) goes
through, summed over the design's passes (`layer.syncs_per_chunk`, the sum of `programs[].syncs_per_chunk`;
both tables of `--version all` show it). For a one-pass design it is its phase program's count, the
design document's; fla has 9 over its six passes, v5 7 over two."""
from __future__ import annotations

import math

from npusim.record.precision import NAMES

from kda.settings.precision import uniform_bytes

SCHEMA_VERSION = 1


def schema() -> dict:
    """The JSON schema of the output (kda/schema/run.schema.json, shipped with the package)."""
    import json
    from importlib.resources import files
    return json.loads(files("kda").joinpath("schema/run.schema.json").read_text(encoding="utf-8"))


def layer_json(dr, tokens: int, heads: int, ai_cores: int) -> dict:
    """The layer on the chip from a DesignReport (npusim/output/report.py)."""
    d = dr.to_dict()
    passes = d.pop("passes")
    for k in ("design", "profile", "interleave"):      # the settings say these
        d.pop(k)
    latency = dr.latency_us
    d.update(speedup=(dr.serial_us / latency) if dr.serial_us and latency else None,
             tokens_per_s=tokens / (latency * 1e-6) if latency else None,
             head_tokens_per_s=tokens * heads / (latency * 1e-6) if latency else None,
             ai_cores=ai_cores, cores_used=max((p["cores"] for p in passes), default=0), passes=passes)
    return d


def pipeline_json(r) -> dict:
    """A one-pass design's pipelined run (npusim/output/report.py Report) in detail."""
    rep = r.report
    out = {
        "latency_us": {"serial": rep.serial_us, "pipelined": rep.pipelined_us, "bound": rep.bound_us,
                       "sync": rep.sync_us_per_chunk, "state_sync": rep.state.time_us,
                       "bound_unit": rep.bound_unit_us, "bound_chain": rep.bound_chain_us, "launch": rep.launch_us},
        "bound_unit": rep.bound_unit,
        "cores": rep.cores, "waves": rep.waves,
        "utilization": {"cube": rep.utilization.get("cube", 0.0), "vec": rep.utilization.get("vec", 0.0),
                        **{k: v for k, v in rep.utilization.items() if k.startswith("link")}},
        "chip_utilization": rep.chip_utilization,
        "shared_bandwidth_utilization": rep.shared_utilization,
        "phase_us": rep.phase_us,
        "state_handoffs": {"per_chunk": 1 if rep.state.mode else 0, "total": rep.state.handoffs,
                           "mode": rep.state.mode, "rides_on": rep.state.rides_on, "bytes": rep.state.nbytes},
        "overlap": None,
    }
    if r.pipelined is not None and (r.pipelined.trace is not None or r.pipelined.timeline is not None):
        from npusim.output.overlap import analyse  # interval-merging metrics of the pipelined run
        out["overlap"] = analyse(r.pipelined).to_dict()
    return out


def programs_json(r) -> list[dict]:
    """The phase program of each pass, per chunk of one sequence (one entry for a one-pass design)."""
    graphs = r.execution.pass_graphs
    names = [p.name for p in r.design.passes] if len(graphs) > 1 else [r.version]
    return [{"pass": name, "program": g.program, "syncs_per_chunk": len(g.syncs), "sync_bytes_per_chunk": g.sync_bytes,
             "sync_tensors": [list(x.tensors) for x in g.syncs],
             "redundant_bytes_per_chunk": g.redundant_bytes, "unused_bytes_per_chunk": g.unused_bytes,
             "macs_by_phase": g.macs_by_phase(), "element_ops_by_phase": g.element_ops_by_phase()}
            for name, g in zip(names, graphs)]


def result_json(r) -> dict:
    """An evaluation (kda.studies.evaluate.VersionResult) in the shape of kda/schema/run.schema.json."""
    s, ex = r.settings, r.execution
    dr = r.design_report
    return {
        "schema_version": SCHEMA_VERSION,
        "version": r.version, "chunks": ex.chunks, "tokens": s.T, "batch": s.batch, "heads": s.heads,
        "value_heads": s.v_heads,
        "chunk_size": s.chunk_size, "d_k": s.d_k, "d_v": s.d_v, "dtype": s.dtype, "gates": s.gates,
        "seed": s.seed, "profile": r.profile.name, "profile_overrides": dict(s.overrides),
        "profile_digest": r.profile.digest(), "interleave": s.interleave,
        "seqlens": list(s.seqlens) if s.seqlens else None,
        "numerics": r.parity_o is not None,
        "layer": None if dr is None else layer_json(dr, s.batch * s.T, s.v_heads, r.profile.chip.ai_cores),
        "pipeline": None if r.report is None else pipeline_json(r),      # a one-pass design's detail
        "programs": programs_json(r),
        "parity": None if r.parity_o is None else {
            **r.parity_o.to_dict(), "state": r.parity_state.to_dict(), "pass": r.passed,
            "first_failing_chunk": r.first_failing_chunk, "note": r.note},
        "errors": None if r.parity_o is None else {
            "o": _json_err(r.parity_o.rel_rms_err), "final_state": _json_err(r.parity_state.rel_rms_err),
            "o_per_chunk": [_json_err(e) for e in r.chunk_errors]},
        "overflow": _overflow(ex),
        "probe": None if r.probe is None else r.probe.to_dict(),
        "safe": r.safe,
        "workspace_error": r.workspace_error,
        "capacity_error": r.capacity_error,
        "precision": _policy_json(ex),
        "attribution": r.attribution.to_dict() if r.attribution is not None else None,
        "memory": plans_json(r) if dr is not None else None,
    }


def plans_of(r) -> list[tuple]:
    """(pass name, plan) of every phase of the design's passes ("" for a one-pass design)."""
    dr = r.design_run
    if dr is None:
        return []
    single = len(dr.passes) == 1
    return [("" if single else pr.pass_.name, p) for pr in dr.passes for p in pr.run.template.plans]


def plans_json(r) -> list[dict]:
    return [{**({"pass": name} if name else {}), **p.to_dict()} for name, p in plans_of(r)]


def _overflow(ex) -> dict | None:
    nf = ex.nonfinite
    if nf is None:
        return None
    meta = ex.graph.tensors.get(nf.tensor)
    phase = meta.producer if meta is not None else None
    return {"phase": phase, "tensor": nf.tensor, "where": nf.where, "chunk": nf.chunk, "sequence": nf.sequence}


def _json_err(x: float):
    return x if math.isfinite(x) else None


def _policy_json(ex) -> dict:
    p, g = ex.precision, ex.graph
    uniform = uniform_bytes(g, p.transfer)
    return {"transfer": p.transfer, "payloads": {x.name: x.dtype for s in g.syncs for x in s.payload},
            "state": p.state_type, "accumulate": p.accumulate or NAMES[p.compute],
            "bytes_per_chunk": {"syncs": sum(g.sync_bytes), "state": g.state.nbytes if g.state else 0,
                                "uniform_transfer": uniform}}
