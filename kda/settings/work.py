"""The work a run of `Settings` asks for, estimated before anything runs (npusim/model/limits.py): a run this
machine cannot finish in reasonable time or memory is refused in one line, saying the limit and how to lift
it (NPUSIM_NO_LIMITS=1)."""
from __future__ import annotations

import os

from npusim import Profile
from npusim.model.limits import MAX_KEPT_EVENTS, MAX_REPLAYS, MAX_RETIMED, MAX_SAMPLES, check, check_replay

# Sequential chunk steps of the numerics on the CPU (tenths of a second each at d_k = d_v = 128).
MAX_NUMERIC_STEPS = 100_000


def chunk_counts(s) -> list[int]:
    """Chunks of each sequence (batch x heads of them; a variable-length batch's own counts per head)."""
    per = [-(-n // s.chunk_size) for n in s.seqlens] if s.seqlens else [-(-s.T // s.chunk_size)] * s.batch
    return [c for c in per for _ in range(s.heads)]


def memory_bytes() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def check_work(s, profile: Profile, samples: int = 0, versions: int = 1) -> None:
    """LimitError (an NpuSimError, one line) for settings beyond what this machine can run."""
    tokens = sum(s.seqlens) if s.seqlens else s.batch * s.T
    sequences = (len(s.seqlens) if s.seqlens else s.batch) * s.heads
    steps = max(-(-n // s.chunk_size) for n in s.seqlens) if s.seqlens else -(-s.T // s.chunk_size)
    cores = min(profile.chip.ai_cores, s.cores or profile.chip.ai_cores)
    per_core = steps * -(-sequences // max(1, min(cores, sequences)))      # an upper bound, before any list
    check_replay(steps, sequences, cores, "the timing")
    if samples:
        check("--uncertainty", samples, MAX_SAMPLES)
        check(f"--uncertainty {samples}: chunks timed over the samples", samples * versions * per_core,
              MAX_RETIMED)
    if s.keep_trace:
        check("the trace's events (--trace, --plot)", 20 * steps * sequences, MAX_KEPT_EVENTS)
    half = memory_bytes() / 2 / 2**30                          # GiB: half of this machine's memory
    # one chunk's working set (recorded even with --no-numerics): C x C matrices and the state, every sequence
    chunk = 4 / 2**30 * sequences * (8 * s.chunk_size ** 2 + 4 * s.chunk_size * (s.d_k + s.d_v) + 2 * s.d_k * s.d_v)
    check("one chunk's working set", chunk, half, " GiB")
    if s.numerics:
        check("the numerics' sequential chunk steps", steps, MAX_NUMERIC_STEPS)
    if s.numerics and s.device == "cpu":
        # inputs, outputs and their fp64 reference, and a state per chunk (FLA's h)
        held = 4 / 2**30 * 2 * tokens * s.heads * (3 * s.d_k + 2 * s.d_v + 2) + 4 / 2**30 * sequences * steps * s.d_k * s.d_v
        check("the numerics' tensors", held, half, " GiB")
