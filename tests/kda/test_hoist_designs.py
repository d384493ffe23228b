"""The chunk step split over two threads on the designs (npusim/record/hoist.py, npusim/record/pipeline.py):
where v3 splits, why a narrow accumulation is not pipelined, torch's threads given back, and freed memory
kept, all with the same bits. What keeping freed memory saves in page faults is measured by
benchmarks/page_faults.py, not tested: it depends on the machine's load."""
from __future__ import annotations

import pytest
import torch

from npusim.record.hoist import Tape

from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.inputs import make_inputs
from tests.npusim.record.test_hoist import _step, same


def _tape_of(version: str, dtype: str = "bf16") -> Tape:
    """The tape the pipelined replay of `version` records (the sequential pass of a design of several)."""
    import npusim.record.replay as replay
    tapes = []
    original = replay.Replay._pipeline

    def spy(self, *args):
        pipe = original(self, *args)
        tapes.append(getattr(self, "tape", None))
        return pipe
    x = make_inputs(1, 192, 2, 32, 32, "slow", 0, initial_state=True)
    replay.Replay._pipeline = spy
    try:
        ex = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, version=version, types=Types(transfer=dtype), loop=ChunkLoop(pipeline=True))
    finally:
        replay.Replay._pipeline = original
    assert ex.replay == "pipelined"
    return next(t for t in tapes if t is not None)


def test_v3_splits_where_the_program_says():
    # v3's chunk step (kda/programs/v3.py) reads S_prev only in Phase D (W S_prev, Q_scaled S_prev) and
    # Phase G; then V_pseudo = U - WS and Phase F's two matmuls depend on it. So of its 8 matmuls, 4 run
    # ahead (K_scaled K_div^T, M K_scaled, M V, Q_scaled K_div^T) and 4 after; the triangular solve, the
    # cumsum and the 4 exps of Phase A run ahead; the state's decay (mul) and update (add) after.
    tape = _tape_of("v3")
    names = lambda calls: [c.name for c in calls]
    ahead, after = names(tape.ahead), names(tape.after)
    assert ahead.count("matmul") == 4 and after.count("matmul") == 4
    assert "linalg_solve_triangular" in ahead and "cumsum" in ahead and ahead.count("exp") == 4
    assert not {"linalg_solve_triangular", "cumsum", "exp"} & set(after)
    # Phase E's V_pseudo = U - WS, Phase G's O_inter + O_intra, gamma_C^T * S_prev + S_delta
    assert after.count("sub") == 1 and after.count("add") == 2 and after.count("mul") == 1
    # the watch: one flag from the sums of every hand-off, the outputs and the state, at the end
    assert after[-4:] == ["stack", "isfinite", "__invert__", "any"]
    # nothing ahead reads the state
    assert tape.state is not None and all(tape.state not in c.reads for c in tape.ahead)


def test_narrow_accumulation_says_why_it_is_not_pipelined():
    from npusim import Precision
    x = make_inputs(1, 128, 2, 32, 32, "slow", 0)
    p = Precision("bf16", accumulate="bf16")
    ex = execute(x.q, x.k, x.v, x.g, x.beta, types=Types(policy=p), loop=ChunkLoop(pipeline=True))
    assert ex.replay == "eager; not pipelined: narrow accumulation"


def test_the_pipeline_gives_torch_its_threads_back():
    x = make_inputs(1, 256, 2, 32, 32, "slow", 0)
    before = torch.get_num_threads()
    execute(x.q, x.k, x.v, x.g, x.beta, loop=ChunkLoop(pipeline=True))
    assert torch.get_num_threads() == before
    # also when the run fails half-way: chunk 2's inputs cannot be cut
    from npusim.record.pipeline import Pipeline
    tape, first = Tape.capture(_step, {"K": torch.ones(2, 4, 4), "V": torch.ones(2, 4, 4)}, torch.zeros(2, 4, 4))

    def inputs_of(t):
        if t == 2:
            raise ValueError("no chunk 2")
        return {"K": torch.ones(2, 4, 4), "V": torch.ones(2, 4, 4)}
    pipe = Pipeline(tape, inputs_of, 4, first)
    state = pipe.step(0, None)[1]
    with pytest.raises(ValueError, match="no chunk 2"):      # at chunk 1 if this thread started chunk 2
        for t in (1, 2):
            state = pipe.step(t, state)[1]
    pipe.close()
    assert torch.get_num_threads() == before


def test_keeping_freed_memory_is_the_same_bits():
    # keep_freed_memory changes where glibc's malloc takes blocks from, never the numbers (its effect on page
    # faults is a benchmark: benchmarks/page_faults.py)
    import npusim
    x = make_inputs(1, 192, 2, 32, 32, "slow", 0)
    run = lambda: execute(x.q, x.k, x.v, x.g, x.beta, types=Types(transfer="bf16"), loop=ChunkLoop(pipeline=True))
    before = run()
    assert npusim.keep_freed_memory() in (True, False)
    after = run()
    assert same(before.o, after.o) and same(before.final_state, after.final_state)

