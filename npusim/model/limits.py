"""How much work a run asks for, estimated before it starts, and the most this model takes on.

A replay costs about a millisecond of this machine's time per chunk a core replays (SimPy events in Python),
a kept trace about 100 bytes per event. Beyond the limits below a run would take hours or exhaust the memory,
so it is refused in one line that says the limit and how to lift it: set NPUSIM_NO_LIMITS=1.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence

from npusim.errors import NpuSimError

ENV = "NPUSIM_NO_LIMITS"
MAX_REPLAYS = 2_000_000          # chunks replayed on the busiest core (~1 ms each: about half an hour)
MAX_SEQUENCES = 10_000_000       # sequences (batch x heads) laid out over the cores
MAX_KEPT_EVENTS = 20_000_000     # trace events kept for --trace / --plot (~2 GB)
MAX_SAMPLES = 10_000             # profiles sampled for an interval (each replays every row or design)
MAX_RETIMED = 100_000_000        # chunks timed over the samples of an interval (re-timed or replayed compiled,
                                 # ~10 us each: about a quarter of an hour)
MAX_POINTS = 1_000_000           # points of a sweep grid
MAX_TOOL_REPLAYS = 50_000_000    # chunks replayed over every prediction a tool makes (validation, calibration)


class LimitError(NpuSimError):
    """A run larger than this machine can do in reasonable time or memory."""


def lifted() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def check(what: str, amount: float, limit: float, unit: str = "") -> None:
    """LimitError (one line) when `amount` exceeds `limit`, unless NPUSIM_NO_LIMITS is set."""
    if amount > limit and not lifted():
        raise LimitError(f"{what}: {amount:.3g}{unit} exceeds this model's limit of {limit:.3g}{unit} "
                         f"(too long or too large for this machine; set {ENV}=1 to run it anyway)")


def memory_bytes() -> float:
    """This machine's physical memory (16 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def available_cores() -> int:
    """The cores this process may run on (its affinity where the system says, else all of them)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_chunk(chunk_size: int, d_k: int, d_v: int, sequences: int = 1, what: str = "one chunk") -> None:
    """The working set of one chunk (recorded even for timing only): C x C matrices, the chunk's rows and the
    state, for `sequences` at once; at most half of this machine's memory."""
    gib = 4 / 2**30 * sequences * (8 * chunk_size ** 2 + 4 * chunk_size * (d_k + d_v) + 2 * d_k * d_v)
    check(f"{what}'s working set", gib, memory_bytes() / 2 / 2**30, " GiB")


def replay_bound(sequences: int, most_chunks: int, cores: int) -> int:
    """Chunks the busiest core replays, at most, for `sequences` sequences of up to `most_chunks` chunks laid
    out over `cores` cores: worked out before any list of that size is made."""
    return most_chunks * -(-sequences // max(1, min(cores, sequences)))


def check_predictions(what: str, replays: int, predictions: int) -> None:
    """A tool that replays `replays` chunks per prediction, `predictions` times (every row under every
    sampled profile, every step of a fit)."""
    check(f"{what}: chunks replayed over {predictions} predictions", replays * predictions, MAX_TOOL_REPLAYS)


def busiest_core_chunks(counts: Sequence[int], cores: int) -> int:
    """Chunks the busiest core replays when sequence s (with counts[s] chunks) runs on core s mod cores."""
    cores = max(1, min(cores, len(counts)))
    return max(sum(counts[c::cores]) for c in range(cores)) if counts else 0


def check_replay(counts: Sequence[int] | int, sequences: int, cores: int, what: str = "the replay") -> None:
    """The replay of `sequences` sequences of `counts` chunks (one count for all, or one each) on `cores`."""
    check(f"{what}: sequences", sequences, MAX_SEQUENCES)
    if isinstance(counts, int):
        per_core = counts * math.ceil(sequences / max(1, min(cores, sequences)))
    else:
        per_core = busiest_core_chunks(counts, cores)
    check(f"{what}: chunks replayed on the busiest core", per_core, MAX_REPLAYS)
