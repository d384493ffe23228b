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

"Syncs per chunk" has one meaning everywhere: the cross-core hand-offs one (sequence, chunk) goes
through, summed over the design's passes (`layer.syncs_per_chunk`, the sum of `programs[].syncs_per_chunk`;
both tables of `--version all` show it). For a one-pass design it is its phase program's count, the
design document's; fla has 9 over its six passes, v5 7 over two."""
from __future__ import annotations

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
    if r.pipelined is not None and r.pipelined.trace is not None:
        from npusim.output.overlap import analyse      # interval-merging metrics of the pipelined run
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
