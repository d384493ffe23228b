"""The work a run of `Settings` asks for, estimated before anything runs (npusim/model/limits.py): a run this
machine cannot finish in reasonable time or memory is refused in one line, saying the limit and how to lift
it (NPUSIM_NO_LIMITS=1)."""
from __future__ import annotations

from npusim import Profile
from npusim.model.limits import (
    MAX_KEPT_EVENTS,
    MAX_RETIMED,
    MAX_SAMPLES,
    check,
    check_chunk,
    check_replay,
    memory_bytes,
)

# Sequential chunk steps of the numerics on the CPU (tenths of a second each at d_k = d_v = 128).
MAX_NUMERIC_STEPS = 100_000
# Value heads per q/k head in the recorded chunk (grouped heads: each is recorded, ~20 ms apiece).
MAX_GROUP = 1024


def chunk_counts(s) -> list[int]:
    """Chunks of each sequence (batch x heads of them; a variable-length batch's own counts per head)."""
    per = [-(-n // s.chunk_size) for n in s.seqlens] if s.seqlens else [-(-s.T // s.chunk_size)] * s.batch
    return [c for c in per for _ in range(s.heads)]


def check_work(s, profile: Profile, samples: int = 0, versions: int = 1) -> None:
    """LimitError (an NpuSimError, one line) for settings beyond what this machine can run."""
    tokens = sum(s.seqlens) if s.seqlens else s.batch * s.T
    sequences = (len(s.seqlens) if s.seqlens else s.batch) * s.heads        # work items: a q/k head each
    states = (len(s.seqlens) if s.seqlens else s.batch) * s.v_heads         # a value head each
    steps = max(-(-n // s.chunk_size) for n in s.seqlens) if s.seqlens else -(-s.T // s.chunk_size)
    cores = min(profile.chip.ai_cores, s.cores or profile.chip.ai_cores)
    per_core = steps * -(-sequences // max(1, min(cores, sequences)))      # an upper bound, before any list
    check_replay(steps, sequences, cores, "the timing")
    check("value heads per q/k head (--value-heads / --heads), each recorded", s.group, MAX_GROUP)
    if samples:
        check("--uncertainty", samples, MAX_SAMPLES)
        check(f"--uncertainty {samples}: chunks timed over the samples", samples * versions * per_core,
              MAX_RETIMED)
    if s.keep_trace:
        check("the trace's events (--trace, --plot)", 20 * steps * sequences, MAX_KEPT_EVENTS)
    half = memory_bytes() / 2 / 2**30                          # GiB: half of this machine's memory
    check_chunk(s.chunk_size, s.d_k, s.d_v, states)     # recorded even with --no-numerics, every value head
    if s.numerics:
        check("the numerics' sequential chunk steps", steps, MAX_NUMERIC_STEPS)
    if s.numerics and s.device == "cpu":
        # inputs, outputs and their fp64 reference, and a state per chunk (FLA's h)
        held = 4 / 2**30 * 2 * tokens * s.v_heads * (3 * s.d_k + 2 * s.d_v + 2) + 4 / 2**30 * states * steps * s.d_k * s.d_v
        check("the numerics' tensors", held, half, " GiB")
