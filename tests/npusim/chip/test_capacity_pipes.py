"""The AI core's memories and pipes (npusim/chip/capacity.py, npusim/chip/pipes.py) on toy programs, against timings
worked out by hand. The toy profile (tests/conftest.py): one Vector unit at 1e5 elements/us, the Cube at
1e6 MACs/us, no per-op overheads, GM free unless a [core] pipe rate is set below; rates in GB/s are
1000 bytes per us each (400 GB/s = 400,000 B/us). All tensors fp32 (4 B)."""

import pytest

from npusim import build_template, load_profile, phase_program, simulate; from npusim.output import chrome_trace
from npusim.chip.capacity import REFUSE, CapacityError
from npusim.output.pipe_trace import segments
from npusim.chip.pipes import MTE2, MTE3
from tests.conftest import randn, record


def core(profile, **fields):
    return profile.replace(**{f"core__{k}": v for k, v in fields.items()})


def two_ops():
    """P (Vec): t = 2x; y = t + x, with x [1, 100, 1000] = 400,000 B. Live at op 0: x, t; at op 1: x, t, y
    (x and t are read there, y is made there and stored): the peak is 3 x 400,000 = 1,200,000 B."""
    @phase_program("two_ops", returns=("y",))
    def program(npu, x):
        with npu.vec("P"):
            t = x * 2.0
            y = t + x
        return y
    return record(program, x=randn(1, 100, 1000))


def plan(graph, profile, name="P", **kw):
    tpl = build_template(graph, profile, **kw)
    return next(p for p in tpl.plans if p.phase == name), tpl


def test_a_phase_that_fits(toy_profile):
    # UB 1200 KiB = 1,228,800 B >= 1,200,000 B: one tile. MTE2 400 GB/s: x in 1 us; two ops of 1e5
    # elements: 2 us; MTE3 200 GB/s: y (400,000 B) out in 2 us. BUFFER_NUM = 1: 1 + 2 + 2 = 5 us.
    p = core(toy_profile(), ub_kib=1200.0, mte2_gbps=400.0, mte3_gbps=200.0)
    pl, tpl = plan(two_ops(), p)
    assert pl.peak_bytes == 1_200_000 and pl.tiles == 1 and pl.reload_bytes == 0
    assert dict(pl.peak_live) == {"x": 400_000, "t": 400_000, "y": 400_000}
    assert pl.busy_us == pytest.approx(5.0)
    assert simulate(tpl, p, chunks=1).makespan_us == pytest.approx(5.0)
    # --core-model off: the [core] table ignored; the toy's GM is free, so only the 2 us of compute remain
    assert plan(two_ops(), p.without_core())[0].busy_us == pytest.approx(2.0)


def test_a_phase_that_needs_two_tiles(toy_profile):
    # UB 1000 KiB = 1,024,000 B < 1,200,000 B; halves of x, t and y hold 600,000 B: two tiles of
    # [1, 100, 500]. Each tile: load 0.5 us, compute 1 us, store 1 us; in series (BUFFER_NUM = 1): 5 us.
    p = core(toy_profile(), ub_kib=1000.0, mte2_gbps=400.0, mte3_gbps=200.0)
    pl, tpl = plan(two_ops(), p)
    assert (pl.tiles, pl.fit_tiles, pl.tile_bytes, pl.tile_shape) == (2, 2, 600_000, (1, 100, 500))
    assert pl.load_bytes == 400_000 and pl.store_bytes == 400_000 and pl.reload_bytes == 0
    assert pl.busy_us == pytest.approx(5.0)
    assert simulate(tpl, p, chunks=1).makespan_us == pytest.approx(5.0)


def test_refused_phase_names_itself_its_tensors_and_bytes(toy_profile):
    p = core(toy_profile(), ub_kib=1000.0)
    with pytest.raises(CapacityError) as err:
        build_template(two_ops(), p, capacity=REFUSE)
    msg = str(err.value)
    # 1,200,000 B = 1171.875 KiB
    assert "Phase P (Vec) holds 1172 KiB per AIV" in msg and "x 390.6" in msg and "t 390.6" in msg
    assert "1000 KiB UB" in msg and "\n" not in msg


def test_no_tiling_fits(toy_profile):
    # one column per tile still holds 3 x 100 rows x 4 B = 1200 B > 1 KiB (1024 B)
    with pytest.raises(CapacityError, match=r"Phase P \(Vec\) fits no tiling: even 1000 tiles"):
        build_template(two_ops(), core(toy_profile(), ub_kib=1.0))


def matmul():
    """Q (Cube): z = a @ w, a [1, 100, 100] (40,000 B, the left operand: every tile needs it whole),
    w [1, 100, 1000] (400,000 B); z [1, 100, 1000] (400,000 B) stored. 1e7 MACs = 10 us."""
    @phase_program("mm", returns=("z",))
    def program(npu, a, w):
        with npu.cube("Q"):
            z = a @ w
        return z
    return record(program, a=randn(1, 100, 100), w=randn(1, 100, 1000, seed=1))


def test_tiling_loads_the_whole_operand_again(toy_profile):
    # L1 500 KiB = 512,000 B < 840,000 B; two tiles hold 40,000 + 200,000 + 200,000 = 440,000 B. Each tile
    # needs all of a: the second loads it again (40,000 B). MTE2 48 GB/s: 40,000 + 400,000 + 40,000 B in
    # 10 us; FixPipe 40 GB/s: z in 10 us; compute 10 us. In series: 30 us. Untiled: 440,000 B in 9.1667 us.
    p = core(toy_profile(), l1_kib=500.0, mte2_gbps=48.0, fixpipe_gbps=40.0)
    pl, _ = plan(matmul(), p, "Q")
    assert (pl.tiles, pl.reload_bytes, pl.load_bytes, pl.memory) == (2, 40_000, 480_000, "L1")
    assert pl.busy_us == pytest.approx(30.0)
    assert pl.to_dict()["store_pipe"] == "FixPipe"
    untiled, _ = plan(matmul(), core(toy_profile(), mte2_gbps=48.0, fixpipe_gbps=40.0), "Q")
    assert untiled.tiles == 1 and untiled.busy_us == pytest.approx(440_000 / 48_000 + 10 + 10)
    # L0: a in L0A 40,000 B, w in L0B 400,000 B, z in L0C 400,000 B (fp32). With L0B 64 KiB (65,536 B) and
    # L0C 128 KiB: ceil(400,000 / 65,536) = 7 and ceil(400,000 / 131,072) = 4 L0 tiles: 7, reported only
    l0, _ = plan(matmul(), core(p, l0b_kib=64.0, l0c_kib=128.0), "Q")
    assert l0.l0 == {"l0a": 40_000, "l0b": 400_000, "l0c": 400_000} and l0.l0_tiles == 7
    assert l0.busy_us == pytest.approx(pl.busy_us)


def scale():
    """P (Vec): y = 2x with x [1, 50000, 2] (400,000 B): 1e5 elements = 1 us; at most two tiles (a column each)."""
    @phase_program("scale", returns=("y",))
    def program(npu, x):
        with npu.vec("P"):
            y = x * 2.0
        return y
    return record(program, x=randn(1, 50000, 2))


def test_double_buffering_hides_a_load_exactly(toy_profile):
    # MTE2 400 GB/s: 1 us of loads; MTE3 4000 GB/s: 0.1 us of stores; 1 us of compute. BUFFER_NUM = 2,
    # two tiles: tile 1 loads (0.5 us) while tile 0 computes (0.5 us): 0.5 + 0.5 + 0.05 + 0.5 = 1.55 us.
    # In series (serial mode) the same tiles take 2 x (0.5 + 0.5 + 0.05) = 2.1 us.
    p = core(toy_profile(), mte2_gbps=400.0, mte3_gbps=4000.0, buffer_num=2)
    pl, tpl = plan(scale(), p)
    assert pl.tiles == 2 and pl.busy_us == pytest.approx(1.55)
    sched = {(pipe, tile): (round(a, 9), round(b, 9)) for pipe, tile, a, b in pl.timing.schedule()}
    assert sched[(MTE2, 1)] == sched[("compute", 0)] == (0.5, 1.0)
    run = simulate(tpl, p, chunks=1)
    assert run.makespan_us == pytest.approx(1.55)
    assert simulate(tpl, p, chunks=1, serial=True).makespan_us == pytest.approx(2.1)
    # one buffer: no overlap, and no reason to cut: 1 + 1 + 0.1 us
    assert plan(scale(), core(p, buffer_num=1))[0].busy_us == pytest.approx(2.1)
    # the trace draws each tile's load and store on the pipes' own threads, and stays well formed
    segs = [(g.pipe, g.tile, round(g.start, 9), round(g.end, 9)) for g in segments(run)]
    assert segs == [(MTE2, 0, 0, 0.5), (MTE2, 1, 0.5, 1.0), (MTE3, 0, 1.0, 1.05), (MTE3, 1, 1.5, 1.55)]
    trace = chrome_trace.build(run)
    assert chrome_trace.check(trace) == []
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"Vec MTE2", "Vec MTE3"} <= names
    ub = [e["args"]["held"] for e in trace["traceEvents"] if e.get("name") == "UB KiB per AIV"]
    assert ub == [pytest.approx(2 * 2 * 200_000 / 1024), 0.0]     # two buffers of half x and half y


def test_a_store_that_cannot_be_hidden(toy_profile):
    # MTE3 100 GB/s: 4 us of stores, more than loads (1 us) and compute (1 us) together. Two tiles:
    # 0.5 + 0.5 + 2 + 2 = 5 us; the whole store shows, only the first load and compute add to it.
    p = core(toy_profile(), mte2_gbps=400.0, mte3_gbps=100.0, buffer_num=2)
    pl, _ = plan(scale(), p)
    assert pl.tiles == 2 and pl.busy_us == pytest.approx(5.0)
    assert pl.busy_us == pytest.approx(0.5 + 0.5 + pl.timing.tiles * pl.timing.store_us)


def test_shared_hbm_stretches_the_transfers_not_the_compute(toy_profile):
    # Two cores in lockstep, HBM 800 GB/s for the chip: each phase's 800,000 B (x in, y out) gets half,
    # 2 us instead of its own 1.1 us: transfers stretch by 2 / 1.1, compute does not.
    # 0.5 (tile 0's load, stretched) ... = 0.5 + (0.5 + 0.05 + 0.5) x 2 / 1.1 = 2.40909 us.
    p = core(toy_profile(cores=2, chip_bw=800.0), mte2_gbps=400.0, mte3_gbps=4000.0, buffer_num=2)
    run = simulate(scale(), p, chunks=1, sequences=2)
    assert run.makespan_us == pytest.approx(0.5 + 1.05 * 2 / 1.1)


def test_a_stretched_transfer_counts_the_transfers_already_under_way(toy_profile):
    # The same two cores simulated each on its own (symmetric=False): both phases start at 0, one after the
    # other in the HBM share. The first finds nothing under way: 800,000 B at 800,000 B/us is 1 us, under its
    # own 1.1 us, so it is not stretched (1.55 us, as alone). The second finds the first under way and gets
    # half: 2 us for its transfers, 0.5 + 1.05 x 2 / 1.1 us in all.
    p = core(toy_profile(cores=2, chip_bw=800.0), mte2_gbps=400.0, mte3_gbps=4000.0, buffer_num=2)
    run = simulate(scale(), p, chunks=1, sequences=2, symmetric=False)
    spans = sorted(e.end - e.start for e in run.trace.events() if e.name == "P")
    assert spans == [pytest.approx(1.55), pytest.approx(0.5 + 1.05 * 2 / 1.1)]


def test_seed_doc_keeps_the_document_assumptions():
    p = load_profile("seed-doc")
    assert p.core.buffer_num == 1 and p.core.align_bytes == 1.0
    assert all(v == float("inf") for v in (p.core.ub_kib, p.core.l1_kib, p.core.mte2_gbps, p.core.mte3_gbps))


@pytest.mark.parametrize("name", ["ascend-910b2", "ascend-910b2-uncalibrated"])
def test_ascend_910b2_memories_have_public_sources(name):
    p = load_profile(name)
    c = p.core
    assert (c.ub_kib, c.l1_kib, c.l0a_kib, c.l0b_kib, c.l0c_kib) == (192, 512, 64, 64, 128)
    assert (c.align_bytes, c.buffer_num) == (32, 2)
    for f in ("ub_kib", "l1_kib", "l0a_kib", "l0b_kib", "l0c_kib", "mte2_gbps", "mte3_gbps", "align_bytes"):
        assert not p.sources[f"core.{f}"].startswith("ASSUMED"), f
    if name.endswith("uncalibrated"):
        assert p.sources["core.fixpipe_gbps"].startswith("ASSUMED")


def test_the_calibrated_chip_says_where_every_number_comes_from():
    """Every [isa] figure names msKPP's table and lines, or is FITTED with its rows; the only ASSUMED fields
    left carry a range; no field is fitted to a held-out row (L = 16384 or H = 48)."""
    p = load_profile("ascend-910b2")
    assert p.isa.enabled == 1
    for key, src in p.sources.items():
        if key.startswith("isa.") and key != "isa.enabled":
            assert "resource910b.cpp:" in src or src.startswith("FITTED:") or src.startswith("one Vector repeat"), key
        if src.startswith("ASSUMED"):
            assert key in p.ranges, key
        if src.startswith("FITTED"):
            assert key in p.ranges and "not held out" in src and "16384" not in src.split("(")[1].split(")")[0], key
    # the fp32 Cube rate: bounded by a public 910B2 measurement (fp32 torch.mm 4096^3: 84.53 TFLOPS, fp16 314.52)
    assert {k for k, s in p.sources.items() if s.startswith("MEASURED")} == {"cube.fp32_macs_per_cycle"}
    lo, hi = p.ranges["cube.fp32_macs_per_cycle"]
    assert lo == pytest.approx(84.53e12 / (2 * 24 * 1.8e9), abs=0.5)       # 978: MACs per cycle per core reached
    assert hi == pytest.approx(4096 * 84.53 / 314.52, abs=0.5)              # 1101: at fp16's share of its peak
    assert "issue 109" in p.sources["cube.fp32_macs_per_cycle"] and lo <= p.cube.fp32_macs_per_cycle <= hi
    assert p.status("cube.fp32_macs_per_cycle") == "MEASURED" and p.status("chip.barrier_us") == "ASSUMED"
    assert p.status("sync.latency_us") == "ASSUMED" and p.status("chip.clock_ghz") == "sourced"
    assert {k for k, s in p.sources.items() if s.startswith("FITTED")} == {
        "isa.vec_dependent_cycles", "isa.gm_burst_cycles", "isa.scalar_access_cycles",   # the chip: PTO stage rows
        "host.launch_us", "host.sync_us"}                                                # the host: Triton rows
    # the fields those rows do not determine keep the profile's value, ASSUMED with their priors' range
    assert {"sync.latency_us", "host.op_us"} <= set(p.assumptions) and "not determined" in p.sources["host.op_us"]


@pytest.mark.parametrize("value, message", [
    ("0", "core.ub_kib must be > 0"), ("-1", "core.ub_kib must be >= 0"), ("nan", "core.ub_kib must be >= 0"),
    ('"big"', "core.ub_kib must be a number")])
def test_bad_capacity_in_a_profile_file(tmp_path, value, message):
    from npusim import ProfileError
    f = tmp_path / "p.toml"
    f.write_text(f'inherits = "ascend-910b2"\nname = "bad"\n[core]\nub_kib = {value}\n')
    with pytest.raises(ProfileError, match=message):
        load_profile(f)


def test_a_transfer_smaller_than_the_alignment_is_one_whole_block_never_zero():
    from npusim.chip.capacity import tile_bytes
    from npusim.record.graph import Local
    row = Local("x", (3, 8), 3 * 8 * 4, "gm", 0, 1)              # 3 rows of 32 B
    assert tile_bytes(row, 1, 32.0) == 3 * 32                      # an exact multiple: no padding
    assert tile_bytes(row, 1, 100.0) == 3 * 100                    # padded up to one block per row
    assert tile_bytes(row, 1, 1e12) == 3 * 1e12                    # however large the block, never 0 bytes


def grouped_product():
    """P (Vec) of a work item of 2 value heads sharing q: t = v * q, y = t.sum(-1); q [1, 100, 1000]
    (400,000 B, shared), v [2, 100, 1000] (800,000 B, one slice per value head); t [2, 100, 1000] is reduced
    along its last axis, so every tile needs it whole (800,000 B; 400,000 B per value head)."""
    from npusim import Executor, Precision

    @phase_program("grouped_product", returns=("y",))
    def program(npu, q, v):
        with npu.vec("P"):
            t = v * q
            y = t.sum(-1)
        return y
    return Executor(program, Precision("fp32")).record({"q": randn(1, 100, 1000), "v": randn(2, 100, 1000, seed=1)},
                                                      None, shapes={"group": 2})


def test_a_grouped_phase_iterates_its_value_heads_and_loads_q_once_per_tile(toy_profile):
    # UB 700 KiB = 716,800 B < t's 800,000 B: no column tiling of both heads fits. One head at a time holds
    # its t (400,000 B) plus a column tile of q and of its v: 2 tiles hold 400,000 + 2 x 200,000 = 800,000 B,
    # too much; 3 tiles of ceil(1000 / 3) = 334 columns hold 400,000 + 2 x 100 x 334 x 4 = 667,200 B.
    # q is loaded once per tile for both heads (3 x 133,600 B), v per head and tile (2 x 3 x 133,600 B).
    # Compute (no GM cost in the toy): the mul and the sum over 200,000 elements at 1e5/us, 4 us in all.
    from npusim.chip.capacity import fitting_tilings
    p = core(toy_profile(), ub_kib=700.0)
    graph = grouped_product()
    phase = graph.phase("P")
    assert phase.group == 2
    assert fitting_tilings(phase, p, 1) == [(2, 3)]
    pl, _ = plan(graph, p)
    assert (pl.parts, pl.tiles, pl.fit_tiles, pl.tile_bytes) == (2, 3, 3, 667_200)
    assert dict(pl.loads) == {"q": 3 * 133_600, "v": 2 * 3 * 133_600}
    assert pl.load_bytes == 3 * 133_600 * 3 and pl.reload_bytes == 0
    assert pl.busy_us == pytest.approx(4.0)
    assert pl.to_dict()["value_heads_per_part"] == 1
    # one value head's t alone (400,000 B) is more than 300 KiB: no tiling fits, and the line says so
    with pytest.raises(CapacityError, match=r"Phase P \(Vec\) fits no tiling: even 1000 tiles \(one column of each "
                                            r"split tensor\), one value head of the 2 at a time, hold"):
        build_template(graph, core(toy_profile(), ub_kib=300.0))
