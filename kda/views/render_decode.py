"""The decode report (python -m kda.decode): one step in detail, or a table of steps (designs, batches, tokens,
state types) with what bounds each; a batch sweep says where the step stops being launch-bound, a token sweep
which design wins at each MTP width."""
from __future__ import annotations

from rich.console import Console

from kda.decode.study import EXACT_POINTS, DecodeResult, DecodeSettings, crossover, points
from kda.decode.timing import FLOOR, STEADY
from kda.views.table import Column, table


def us(x: float) -> str:
    return f"{x:,.1f}"


def verdict(r: DecodeResult) -> str:
    if r.parity is None:
        return "-"
    ok = r.parity.passed and (r.prefill is None or (r.prefill.passed and r.prefill_state is not None
                                                     and r.prefill_state.passed))
    return "pass" if ok else "FAIL"


def gbps(r: DecodeResult) -> float:
    """The unique bytes of the step over its latency (what a benchmark's GB/s counts)."""
    return r.run.floor_bytes / (r.run.latency_us * 1e3)


def header(r: DecodeResult, s: DecodeSettings) -> str:
    run = r.run
    opts = f" · in kernel: {', '.join(run.design.options if run.design.options is not None else s.options)}" \
        if (run.design.options or s.options) else ""
    seq = f" · seqlens {','.join(map(str, s.seqlens))}" if s.seqlens else ""
    return (f"KDA decode · {run.design.name} on {s.profile} · {run.shape.text()}{seq} · q/k/v {run.types.io}, "
            f"state {run.types.state}{' (warm in L2)' if run.warm else ''}{opts}\n{run.design.description}")


def parity_lines(r: DecodeResult) -> list[str]:
    if r.parity is None:
        return []
    p, lines = r.parity, ["Parity against the fp64 recurrence (FLA's metric: max abs <= 1e-6, else rel RMS < 0.005)"
                          + (f", on the first {r.checked_sequences} of {r.batch} sequences" if r.checked_sequences < r.batch else "")]
    lines.append(f"  this step        output rel RMS {p.output.rel_rms_err:.2e}  state {p.state.rel_rms_err:.2e}  "
                 f"{'pass' if p.passed else 'FAIL'}")
    if r.prefill is not None and r.prefill_state is not None:
        q = r.prefill
        lines.append(f"  after a prefill  output rel RMS {q.output.rel_rms_err:.2e}  state {q.state.rel_rms_err:.2e}  "
                     f"{'pass' if q.passed else 'FAIL'}   (v6 prefill, then this step, against the recurrence of all tokens)")
        lines.append(f"  = longer prefill state rel RMS {r.prefill_state.rel_rms_err:.2e}  "
                     f"{'pass' if r.prefill_state.passed else 'FAIL'}   (against the v6 prefill of the longer sequences)")
    return lines


def chip_lines(r: DecodeResult) -> list[str]:
    run = r.run
    terms = run.terms()
    n = run.workers
    imbalance = max(run.counts) / (run.items / n)
    lines = ["The step on the chip",
             f"  latency          {us(run.latency_us):>10} us   launch {us(run.launch_us)} + device {us(run.device_us)}",
             f"  HBM floor        {us(run.floor_us):>10} us   {run.floor_bytes / 1e6:,.2f} MB (the state in and out once, "
             f"q, k, v, g, beta, o) at {run.bandwidth_gbps:,.0f} GB/s; latency = {run.latency_us / run.floor_us:.2f}x the floor",
             f"  achieved         {gbps(r):>10,.0f} GB/s of unique bytes",
             f"  bound            {run.bound:>10}      " + "   ".join(f"{k} {us(v)} us" for k, v in terms.items()),
             f"  traffic          {run.traffic_bytes / 1e6:>10,.2f} MB   {run.traffic_bytes / run.floor_bytes:.2f}x the floor's "
             f"bytes (re-reads and padded rows)",
             f"  work             {run.items:>10,} items over {n} workers (at most {max(run.counts)} each, "
             f"{imbalance:.2f}x the mean); items {LOOPS.get(run.loop, run.loop)}"]
    return lines


def why(r: DecodeResult) -> str:
    """What keeps the step above the HBM floor, largest first."""
    run = r.run
    parts = {"the launch": run.launch_us, "re-read or padded bytes": max(0.0, run.traffic_us - run.floor_us),
             "work the transfers do not hide": max(0.0, run.device_us - max(run.traffic_us, run.floor_us)),
             "items unevenly spread": 0.0}
    mean = run.items / run.workers
    if max(run.counts) > mean:
        parts["items unevenly spread"] = run.device_us * (1 - mean / max(run.counts))
    parts = {k: v for k, v in parts.items() if v > 0.005 * run.latency_us}
    above = run.latency_us - run.floor_us
    if above <= 0:
        return "  at the HBM floor"
    top = sorted(parts.items(), key=lambda kv: -kv[1])
    return f"  {us(above)} us above the floor: " + "; ".join(f"{k} {us(v)} us" for k, v in top)


LOOPS = {"serial": "one after another", "store_behind": "each store behind the next item's load",
         "double": "two in flight", "ping/pong": "two in flight (ping/pong slots)",
         "tiled, serial": "tiled, one after another"}


def print_one(r: DecodeResult, s: DecodeSettings, console: Console) -> None:
    console.print(header(r, s), highlight=False, soft_wrap=True)
    for block in (parity_lines(r), chip_lines(r) + [why(r)]):
        if block:
            console.print("\n" + "\n".join(block), highlight=False, soft_wrap=True)


def print_table(results: list[DecodeResult], s: DecodeSettings, console: Console) -> None:
    cols = [Column("design", lambda r: r.design.name, "left"), Column("B", lambda r: str(r.batch)),
            Column("T", lambda r: str(r.tokens)), Column("state", lambda r: r.state, "left"),
            Column("latency µs", lambda r: us(r.run.latency_us)), Column("floor µs", lambda r: us(r.run.floor_us)),
            Column("× floor", lambda r: f"{r.run.latency_us / r.run.floor_us:.2f}x"),
            Column("launch", lambda r: f"{r.run.launch_us / r.run.latency_us:.0%}"),
            Column("GB/s", lambda r: f"{gbps(r):,.0f}"), Column("bound", lambda r: r.run.bound, "left"),
            Column("numerics", verdict, "left", when=s.numerics)]
    title = (f"KDA decode on {s.profile} · H={s.heads}" + (f" HV={s.hv}" if s.hv != s.heads else "")
             + f" K={s.d_k} V={s.d_v} · q/k/v {s.dtype}" + (" · state warm in L2" if s.warm else ""))
    console.print(table(title, cols, results))
    if points(s) > EXACT_POINTS:
        console.print(f"({points(s)} steps: a worker's items beyond {2 * STEADY} extrapolated at the event model's "
                      f"period, within 3.5 % of the full replay)", highlight=False, soft_wrap=True)
    for line in summary(results, s):
        console.print(line, highlight=False, soft_wrap=True)


def summary(results: list[DecodeResult], s: DecodeSettings) -> list[str]:
    """A batch sweep's crossover per design; a token sweep's winner per T."""
    out = []
    groups: dict[tuple, list[DecodeResult]] = {}
    for r in results:
        groups.setdefault((r.design.name, r.tokens, r.state), []).append(r)
    for (name, T, state), rs in groups.items():
        if len(rs) < 2:
            continue
        c = crossover(rs)
        launch = f"launch-bound up to B = {c.launch_bound_until}" if c.launch_bound_until else "never launch-bound"
        hbm = (f"{FLOOR}-bound from B = {c.bandwidth_bound_from}" if c.bandwidth_bound_from
               else f"never {FLOOR}-bound in this range")
        floor = f"the HBM floor passes the launch at B = {c.floor_passes_launch}" if c.floor_passes_launch else ""
        out.append(f"{name} (T={T}, state {state}): {launch}; {hbm}" + (f"; {floor}" if floor else ""))
    by_point: dict[tuple, list[DecodeResult]] = {}
    for r in results:
        by_point.setdefault((r.batch, r.tokens, r.state), []).append(r)
    tokens = sorted({r.tokens for r in results})
    if len(tokens) > 1 and len({r.design.name for r in results}) > 1:
        for (B, T, state), rs in sorted(by_point.items(), key=lambda kv: kv[0][1]):
            best = min(rs, key=lambda r: r.run.latency_us)
            cube = f", the Cube's 16-row fractals {min(T, 16) / 16:.0%} full" if any(r.design.name == "chunked" for r in rs) else ""
            out.append(f"T={T} (B={B}, state {state}): {best.design.name} fastest, {us(best.run.latency_us)} us{cube}")
    return out


def print_results(results: list[DecodeResult], s: DecodeSettings, console: Console) -> None:
    if len(results) == 1:
        print_one(results[0], s, console)
    else:
        print_table(results, s, console)


def to_json(r: DecodeResult) -> dict:
    run = r.run
    out: dict = {
        "design": r.design.name, "source": r.design.source or None, "batch": r.batch, "tokens": r.tokens,
        "heads": run.shape.heads, "value_heads": run.shape.value_heads, "d_k": run.shape.d_k, "d_v": run.shape.d_v,
        "types": {"io": run.types.io, "gate": run.types.gate, "state": run.types.state}, "warm": run.warm,
        "latency_us": run.latency_us, "device_us": run.device_us, "launch_us": run.launch_us,
        "floor_us": run.floor_us, "floor_bytes": run.floor_bytes, "traffic_bytes": run.traffic_bytes,
        "bound": run.bound, "terms_us": run.terms(), "workers": run.workers, "items": run.items,
        "most_items_per_worker": max(run.counts), "loop": run.loop, "achieved_gbps": gbps(r)}
    if r.parity is not None:
        out["parity"] = {"output": r.parity.output.to_dict(), "state": r.parity.state.to_dict()}
        if r.prefill is not None and r.prefill_state is not None:
            out["parity"]["after_prefill"] = {"output": r.prefill.output.to_dict(), "state": r.prefill.state.to_dict(),
                                              "longer_prefill_state": r.prefill_state.to_dict()}
        out["parity"]["sequences_checked"] = r.checked_sequences
    return out

