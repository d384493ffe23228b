"""The AI core's memories and pipes per phase (npusim/chip/capacity.py, npusim/chip/pipes.py): what each phase holds
against its unit's UB or L1, its tiles, and its MTE2 / compute / MTE3 or FixPipe time per chunk."""
from __future__ import annotations

import math

from rich import box
from rich.table import Table

from kda.studies.run_json import plans_of

KIB = 1024


def _kib(x: float) -> str:
    return "∞" if not math.isfinite(x) else f"{x / KIB:.1f}"


def memory_table(r) -> Table | None:
    plans = plans_of(r)
    if not plans:
        return None
    core = r.profile.core
    t = Table(title=f"Memories and pipes per chunk, in KiB and µs; tiles (the fewest that fit); stores on MTE3 from UB, on "
                    f"FixPipe from L0C (BUFFER_NUM = {core.buffer_num}; UB per AIV, L1 per AIC; MTE2 {r.profile.pipe_gbps('mte2'):g}, MTE3 {r.profile.pipe_gbps('mte3'):g}, "
                    f"FixPipe {r.profile.pipe_gbps('fixpipe'):g} GB/s)", box=box.SIMPLE_HEAD, title_justify="left",
              pad_edge=False)
    many = any(name for name, _ in plans)
    cols = ["pass: phase" if many else "phase", "peak/cap", "tiles", "tile", "tile shape", "reload", "MTE2",
            "compute", "store", "busy (serial)"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("pass: phase", "phase", "tile shape") else "right")
    last = None
    for name, p in plans:
        d = p.to_dict()
        if many and name != last:                # a pass's name on a row of its own, its phases under it
            t.add_row(f"{name}:", *[""] * (len(cols) - 1))
            last = name
        row = [
            ("  " if many else "") + f"{p.phase} ({'Cube' if p.unit == 'cube' else 'Vec'})",
            f"{_kib(p.peak_bytes)}/{_kib(p.capacity_bytes)} {p.memory}",
            f"{p.tiles} ({p.fit_tiles})" + (f" × {p.parts} parts" if p.parts > 1 else ""), _kib(p.tile_bytes),
            "×".join(map(str, p.tile_shape)) if p.tile_shape and (p.tiles > 1 or p.parts > 1) else "",
            f"{p.reload_bytes / KIB:g}" if p.reload_bytes else "",
            f"{d['load_us']:.3f}", f"{d['compute_us']:.3f}",
            f"{d['store_us']:.3f}" if d["store_us"] else "",
            f"{d['busy_us']:.3f} ({d['serial_busy_us']:.3f})"]
        t.add_row(*row)
    if any(p.parts > 1 for _, p in plans):
        t.caption = ("× n parts: the phase takes its work item's value heads a part at a time, holding the q/k "
                     "tile it loaded once for all of them (npusim/chip/capacity.py)")
        t.caption_justify = "left"
    return t
