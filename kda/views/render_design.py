"""Rich tables for designs: the passes of one design, and every design side by side for a shape (layer
latency against its bound, the chip's HBM floor and the Cube roofline; launches, barriers, hand-offs,
HBM bytes)."""
from __future__ import annotations

from rich import box
from rich.table import Table

from kda.studies.evaluate import VersionResult

KIB, GB = 1024, 1e9


def passes_table(r: VersionResult) -> Table:
    rep = r.design_report
    t = Table(title=f"{r.version}: {len(rep.passes)} pass(es), {rep.launches} launch(es), {rep.barriers} barrier(s)"
                    + (f", {rep.interleave} sequences interleaved per core" if rep.interleave > 1 else ""),
              box=box.SIMPLE_HEAD, title_justify="left")
    for col in ("pass", "layout", "starts with", "items", "cores", "µs", "bound µs", "syncs / item",
                "KiB / item", "HBM GB", "MACs / item"):
        t.add_column(col, justify="left" if col in ("pass", "layout", "starts with") else "right")
    for p in rep.passes:
        t.add_row(p.name, p.layout, f"{p.boundary} {p.boundary_us:g} µs", f"{p.items:,}", str(p.cores),
                  f"{p.makespan_us:,.1f}", f"{p.bound_us:,.1f}", str(p.syncs_per_item),
                  f"{p.sync_bytes_per_item / KIB:g}", f"{p.hbm_bytes / GB:.3f}", f"{p.macs / 1e6:.2f} M")
    return t


def layer_table(r: VersionResult) -> Table:
    rep = r.design_report
    t = Table(title="The design on the chip", box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("")
    t.add_column("", justify="right")
    t.add_column("", justify="left")
    t.add_row("latency", f"{rep.latency_us:,.1f} µs", f"serial {rep.serial_us:,.1f} µs" if rep.serial_us else "")
    t.add_row("bound", f"{rep.bound_us:,.1f} µs", f"efficiency {rep.efficiency:.2f} (bound / latency)")
    t.add_row("HBM floor", f"{rep.floor_us:,.1f} µs", f"{rep.floor_bytes / GB:.3f} GB (inputs, output, states once) "
              f"/ HBM; latency = {rep.floor_ratio:.2f}x the floor")
    t.add_row("Cube roofline", f"{rep.roofline_us:,.1f} µs", f"roofline efficiency {rep.roofline_efficiency:.1%}")
    t.add_row("HBM traffic", f"{rep.hbm_bytes / GB:.3f} GB", f"{rep.hbm_bytes / max(rep.floor_bytes, 1):.2f}x the floor's")
    return t


def designs_side_by_side(results: list[VersionResult]) -> Table:
    timed = [r for r in results if r.design_report is not None]
    t = Table(title="Designs on the chip (layer latency, its bound, the HBM floor)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("")
    for r in timed:
        t.add_column(r.version, justify="right")

    def row(name, fn):
        t.add_row(name, *[fn(r.design_report) for r in timed])
    row("layer latency µs", lambda d: f"{d.latency_us:,.1f}")
    row("bound µs", lambda d: f"{d.bound_us:,.1f}")
    row("HBM floor µs", lambda d: f"{d.floor_us:,.1f}")
    row("latency / floor", lambda d: f"{d.floor_ratio:.2f}x")
    row("efficiency (bound / latency)", lambda d: f"{d.efficiency:.2f}")
    row("Cube roofline efficiency", lambda d: f"{d.roofline_efficiency:.1%}")
    row("launches / barriers", lambda d: f"{d.launches} / {d.barriers}")
    row("passes", lambda d: str(len(d.passes)))
    row("syncs per chunk (all passes)", lambda d: str(d.syncs_per_chunk))
    row("hand-off KiB per chunk", lambda d: f"{d.sync_bytes_per_chunk / KIB:g}")
    row("HBM GB", lambda d: f"{d.hbm_bytes / GB:.3f}")
    row("cores used (most)", lambda d: str(max(p.cores for p in d.passes)))
    return t
