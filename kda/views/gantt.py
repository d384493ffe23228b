"""The drawing primitives of the Gantt charts (matplotlib, Agg backend): rows per AI core (Cube, the two
hand-off links, the Vector units), phase bars labelled with letter and chunk, hand-off bars and arrows,
busy fractions per row. Where the profile gives the core's pipes (npusim/chip/pipes.py), rows Cube MTE2 / Cube
FixPipe and Vec MTE2 / Vec MTE3 show each tile's GM load and store beside the compute (only the rows some
phase moves data on). plots.py composes them into figures."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from npusim import Run  # noqa: E402
from npusim.model.engine import PHASE, STATE, SYNC  # noqa: E402
from npusim.output.overlap import busy_intervals, intersect  # noqa: E402
from npusim.output.pipe_trace import pipe_rows, segments  # noqa: E402
from npusim.record.graph import CUBE, VEC  # noqa: E402

COLORS = {CUBE: ("#2f6db5", "#7fa8dc"), VEC: ("#e07b28", "#f3b27a")}
TRANSFER, LATENCY = "#4d4d4d", "#c9c9c9"
STATE_COLOR, ARROW_COLOR, BOTH_COLOR = "#c0392b", "#333333", "#7b3fa0"
LINKS = ("link:cube->vec", "link:vec->cube")
BOTH = "both"
ROW_NAME = {CUBE: "Cube", "link:cube->vec": "Cube→Vec", "link:vec->cube": "Vec→Cube", BOTH: "Cube‖Vec"}


@dataclass(frozen=True)


class Row:
    core: int
    unit: str            # "cube", "vec", a link
    vec_index: int       # which Vector unit (0 otherwise)
    y: float

    @property
    def label(self) -> str:
        if self.unit.startswith(PIPE):
            return self.unit[len(PIPE):]
        return f"Vec{self.vec_index}" if self.unit == VEC else ROW_NAME.get(self.unit, self.unit)


PIPE = "pipe:"


def rows_for(run: Run, cores: Sequence[int], both_busy: bool = False, pipes: Sequence[str] = ()) -> list[Row]:
    """Top to bottom per core: Cube, the links, Vec0, Vec1, ... (and a Cube‖Vec row if asked); the pipe rows
    named in `pipes` ("Cube MTE2", ...): the Cube's after Cube, the Vector units' after them."""
    rows, y = [], 0.0
    n_vec = run.profile.chip.vec_per_core
    for c in cores:
        extra = [(BOTH, 0)] if both_busy else []
        cube_pipes = [(PIPE + u, 0) for u in pipes if u.startswith("Cube")]
        vec_pipes = [(PIPE + u, 0) for u in pipes if u.startswith("Vec")]
        for unit, k in [(CUBE, 0), *cube_pipes, *[(link, 0) for link in LINKS], *[(VEC, i) for i in range(n_vec)],
                        *vec_pipes, *extra]:
            if unit == BOTH:
                y -= 0.6                           # room for the labels under the last Vec row
            rows.append(Row(c, unit, k, y))
            y -= 1.0
        y -= 0.4                                   # a gap between cores
    return rows


def shown_cores(run: Run, max_cores: int) -> list[int]:
    return list(range(min(run.cores_used, max_cores)))


def zoom_window(run: Run, detail_chunks: int, window_chunks: int) -> tuple[float, float, tuple[int, int]] | None:
    """None: draw everything. Else a time range covering `window_chunks` chunks from the steady state."""
    if run.chunks <= detail_chunks:
        return None
    first = max(0, run.chunks // 2 - window_chunks // 2)
    last = first + window_chunks - 1
    evs = [e for e in run.traced().events() if e.seq == 0 and first <= e.chunk <= last]
    return min(e.start for e in evs), max(e.end for e in evs), (first, last)


def draw_gantt(ax, run: Run, *, cores: Sequence[int] | None = None, t_range: tuple[float, float] | None = None,
               arrows: bool = True, labels: bool = True, both_busy: bool = False, chunk_marks: bool = False,
               max_cores: int = 2, arrow_alpha: float = 0.8) -> dict:
    """Bars and arrows of `run` on `ax`. Returns {(core, unit, vec index): bars drawn} for phases and syncs
    (syncs: one bar each, its transfer; the latency after it is drawn lighter and not counted)."""
    cores = list(cores) if cores is not None else shown_cores(run, max_cores)
    pipes = pipe_rows(run)
    rows = rows_for(run, cores, both_busy, pipes)
    row_of = {(r.core, r.unit, r.vec_index): r for r in rows}
    events = [e for e in run.traced().events() if e.core in cores]
    lo, hi = t_range if t_range is not None else (0.0, run.makespan_us)
    events = [e for e in events if e.end > lo and e.start < hi or e.start == e.end == lo]
    ax.set_xlim(lo, hi)
    px = _px_per_us(ax, lo, hi)
    min_w = 1.2 / px                              # the shortest bar still shows (1.2 px)
    n_vec = run.profile.chip.vec_per_core
    counts: dict = {}
    bars: dict = {}
    for e in events:
        if e.kind == PHASE:
            shade = COLORS.get(e.unit, ("#888888", "#bbbbbb"))[e.chunk % 2]
            for i in range(n_vec if e.unit == VEC else 1):
                bars.setdefault(("phase", e.core, e.unit, i), []).append(
                    ((e.start, max(e.end - e.start, min_w)), shade))
        elif not (e.kind == STATE and e.end <= e.start):
            bars.setdefault(("transfer", e.core, e.unit, 0), []).append(
                ((e.start, max(e.busy_end - e.start, min_w)), TRANSFER))
            bars.setdefault(("latency", e.core, e.unit, 0), []).append(((e.busy_end, e.end - e.busy_end), LATENCY))
    for g in segments(run, lo, hi) if pipes else ():      # each tile's load and store on its pipe's row
        if g.core in cores:
            bars.setdefault(("pipe", g.core, PIPE + g.row, 0), []).append(
                ((g.start, max(g.end - g.start, min_w)), COLORS[g.unit][g.chunk % 2]))
    for (kind, core, unit, i), items in bars.items():
        row = row_of[(core, unit, i)]
        height = 0.72 if kind == "phase" else 0.42
        coll = ax.broken_barh([x for x, _ in items], (row.y - height / 2, height),
                              facecolors=[c for _, c in items], edgecolor="none")
        coll.set_gid(f"{kind}:{core}:{unit}:{i}")
        if kind not in ("latency", "pipe"):
            counts[(core, unit, i)] = counts.get((core, unit, i), 0) + len(items)
    if labels:
        _labels(ax, events, row_of, n_vec, lo, hi, px)
    if chunk_marks:
        _chunk_marks(ax, events, lo, hi, px)
    if arrows:
        _arrows(ax, run, events, row_of, arrow_alpha)
    if both_busy:
        busy = busy_intervals(run)
        for c in cores:
            both = intersect(busy.get((c, CUBE), []), busy.get((c, VEC), []))
            row = row_of[(c, BOTH, 0)]
            ax.broken_barh([(a, max(b - a, min_w)) for a, b in both if b > lo and a < hi], (row.y - 0.3, 0.6),
                           facecolors=BOTH_COLOR, gid=f"both:{c}")
    ax.set_yticks([r.y for r in rows])
    ax.set_yticklabels([(f"core {r.core} · " if len(cores) > 1 else "") + r.label for r in rows], fontsize=8.5)
    ax.set_ylim(min(r.y for r in rows) - 0.95, max(r.y for r in rows) + 0.95)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return counts


def _labels(ax, events, row_of, n_vec: int, lo: float, hi: float, px: float) -> None:
    """Phase letter + chunk (+ sequence where a core runs several) inside its bar when it fits, else beside the row (above Cube, below Vec) when
    there is room; sync numbers above their transfer."""
    outside_end: dict = {}
    seqs: dict = {}
    for e in events:
        if e.kind == PHASE:
            seqs.setdefault(e.core, set()).add(e.seq)
    for e in sorted(events, key=lambda e: e.start):
        a, b = max(e.start, lo), min(e.end, hi)
        width_px = (b - a) * px
        if e.kind == PHASE:
            text = phase_tag(e.name, e.chunk, e.seq if len(seqs[e.core]) > 1 else None)
            need = 6.2 * len(text) + 3
            for i in range(n_vec if e.unit == VEC else 1):
                row = row_of[(e.core, e.unit, i)]
                if width_px >= need:
                    ax.text((a + b) / 2, row.y, text, ha="center", va="center", fontsize=7.5, color="white",
                            clip_on=True)
                    continue
                x = (a + b) / 2
                if (hi - x) * px < need / 2 or (x - lo) * px < need / 2:
                    continue
                if e.unit == VEC and i != n_vec - 1:      # beside a Vec row but the last: on the next row's bars
                    continue
                up = e.unit == CUBE
                for level in (0, 1):               # beside the row, a second line further out if needed
                    key = (e.core, e.unit, i, level)
                    if outside_end.get(key, -1e30) <= x - need / 2 / px:
                        off = 0.38 + 0.2 * level
                        ax.text(x, row.y + (off if up else -off), text, ha="center",
                                va="bottom" if up else "top", fontsize=6.5,
                                color=COLORS.get(e.unit, ("#333333",))[0], clip_on=True)
                        outside_end[key] = x + need / 2 / px
                        break
        elif e.kind == SYNC and (e.end - e.start) * px >= 12:
            row = row_of[(e.core, e.unit, 0)]
            ax.text((max(e.start, lo) + min(e.end, hi)) / 2, row.y + 0.22, e.label, ha="center", va="bottom",
                    fontsize=7, color="#222222", clip_on=True)


def phase_tag(name: str, chunk: int, seq: int | None = None) -> str:
    """D3 for Phase D of chunk 3; Vec6a·3 where the name would run into the number; D3·s1 for sequence 1's,
    where a core runs several sequences (interleaved heads)."""
    tag = f"{name}{chunk}" if len(name) == 1 else f"{name}·{chunk}"
    return tag if seq is None else f"{tag}·s{seq}"


def _chunk_marks(ax, events, lo: float, hi: float, px: float) -> None:
    """Ticks on the top edge where each chunk's first node starts (sequence 0): every chunk, or every 2nd, 5th,
    10th, ... (the smallest stride whose ticks stand 24 px apart), so that a missing tick is a pattern."""
    starts: dict = {}
    for e in events:
        if e.seq == 0 and e.index == 0 and lo <= e.start <= hi:
            starts[e.chunk] = e.start
    shown = sorted(starts.items())
    for stride in _strides(max(starts, default=0) + 1):
        shown = sorted((c, t) for c, t in starts.items() if c % stride == 0)
        if all((b - a) * px >= 24 for (_, a), (_, b) in zip(shown, shown[1:])):
            break
    pos, labels = [t for _, t in shown], [f"c{c}" for c, _ in shown]
    top = ax.secondary_xaxis("top")
    top.set_xticks(pos)
    top.set_xticklabels(labels)
    top.tick_params(length=3, labelsize=7, pad=1, colors="#555555")


def _strides(n: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to the first one at least n (one tick at most among chunks 0 .. n - 1)."""
    out = [1]
    while out[-1] < n:
        k = len(out) - 1
        out.append((2, 5, 10)[k % 3] * 10 ** (k // 3))
    return out


def _arrows(ax, run: Run, events, row_of, alpha: float = 0.8) -> None:
    """Producer end -> consumer start, for every hand-off among the drawn events."""
    tpl = run.template
    nodes = tpl.nodes
    at = {(e.seq, e.chunk, e.index): e for e in events}
    consumers: dict[int, list[int]] = {}
    for nd in nodes:
        for d in nd.deps:
            consumers.setdefault(d, []).append(nd.index)
    pairs = []
    for e in events:
        nd = nodes[e.index]
        if nd.kind == SYNC:
            prod = at.get((e.seq, e.chunk, nd.deps[0]))
            for c in consumers.get(e.index, []):
                cons = at.get((e.seq, e.chunk, c))
                if prod is not None and cons is not None:
                    pairs.append((prod, cons, ARROW_COLOR, "-"))
    for a, b in tpl.state_edges:
        if nodes[b].kind == PHASE:
            continue
        for e in events:
            if e.index == b and e.chunk > 0:
                prod = at.get((e.seq, e.chunk - 1, a))
                for c in consumers.get(b, []):
                    cons = at.get((e.seq, e.chunk, c))
                    if prod is not None and cons is not None:
                        pairs.append((prod, cons, STATE_COLOR, "--"))
    for prod, cons, color, style in pairs:
        y0 = row_of[(prod.core, prod.unit, 0)].y
        y1 = row_of[(cons.core, cons.unit, 0)].y
        y0 += -0.35 if y1 < y0 else 0.35
        y1 += 0.35 if y1 < y0 else -0.35
        ax.annotate("", xy=(cons.start, y1), xytext=(prod.end, y0),
                    arrowprops=dict(arrowstyle="-|>", color=color, lw=0.7, ls=style, shrinkA=0, shrinkB=0,
                                    mutation_scale=7, alpha=alpha), annotation_clip=False)


def draw_utilisation(ax, run: Run, *, cores: Sequence[int] | None = None, max_bins: int = 300,
                     max_cores: int = 2) -> None:
    """The whole run as busy fraction per time bin and row (for runs too long for bars): the coloured part of
    each grey band is the busy share of that bin; a bin ends where a chunk of sequence 0 ends, so each holds
    whole chunks and the steady state reads flat; the right edge gives each row's busy share over the run."""
    cores = list(cores) if cores is not None else shown_cores(run, max_cores)
    rows = rows_for(run, cores)
    busy = busy_intervals(run)
    ends = sorted(chunk_ends(run, seq=0))
    step = max(1, -(-len(ends) // max_bins))
    edges = np.array(sorted({0.0, *ends[step - 1::step], run.makespan_us}))
    shares = []
    for r in rows:
        ax.add_patch(matplotlib.patches.Rectangle((0.0, r.y - 0.4), run.makespan_us, 0.8, color="#efefef", lw=0))
        ivs = np.array(busy.get((r.core, r.unit), []), dtype=float).reshape(-1, 2)
        share = float((ivs[:, 1] - ivs[:, 0]).sum() / run.makespan_us) if len(ivs) else 0.0
        shares.append(share)
        if not len(ivs):
            continue
        cum = np.clip(edges[:, None] - ivs[None, :, 0], 0.0, (ivs[:, 1] - ivs[:, 0])[None, :]).sum(1)
        frac = np.append(np.diff(cum) / np.diff(edges), 0.0)
        color = COLORS.get(r.unit, (TRANSFER,))[0]
        ax.fill_between(edges, r.y - 0.4, r.y - 0.4 + 0.8 * frac, step="post", color=color, linewidth=0,
                        gid=f"util:{r.core}:{r.unit}:{r.vec_index}")
    ax.set_xlim(0.0, run.makespan_us)
    ax.set_yticks([r.y for r in rows])
    ax.set_yticklabels([(f"core {r.core} · " if len(cores) > 1 else "") + r.label for r in rows], fontsize=8.5)
    ax.set_ylim(min(r.y for r in rows) - 0.6, max(r.y for r in rows) + 0.6)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks([r.y for r in rows])
    right.set_yticklabels([f"{x:.0%} busy" for x in shares], fontsize=8)
    right.tick_params(length=0)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)


def _px_per_us(ax, lo: float, hi: float) -> float:
    fig = ax.figure
    width_in = ax.get_position().width * fig.get_figwidth()
    return width_in * fig.dpi / max(hi - lo, 1e-12)


def legend_handles(run: Run, both_busy: bool = False) -> list:
    h = [Patch(color=COLORS[CUBE][0], label="Cube phase"), Patch(color=COLORS[VEC][0], label="Vector phase"),
         Patch(color=TRANSFER, label="hand-off: transfer (holds the link)"),
         Patch(color=LATENCY, label="hand-off: fixed latency"),
         Line2D([], [], color=ARROW_COLOR, lw=1, marker=">", markersize=4, label="producer → consumer")]
    if run.template.state_mode:
        h.append(Line2D([], [], color=STATE_COLOR, lw=1, ls="--", label="state → next chunk"))
    if both_busy:
        h.append(Patch(color=BOTH_COLOR, label="Cube and Vector both busy"))
    return h

def chunk_ends(run: Run, seq: int | None = None) -> list[float]:
    """When each chunk's last node ends (of one sequence, or of all)."""
    ends: dict = {}
    for e in run.traced().events():
        if seq is not None and e.seq != seq:
            continue
        k = (e.seq, e.chunk)
        ends[k] = max(ends.get(k, 0.0), e.end)
    return list(ends.values())
