"""python -m kda.decode and kda.fused_recurrent_kda: bad input gets one line naming it (exit 2 /
KdaInputError), a run reports its bound and numerics, a sweep says where the step changes bound."""
import json

import pytest
import torch
import torch.nn.functional as F

import kda
from kda.cli.decode import main
from kda.cli.run import main as run_main
from kda.reference.parity import compare
from kda.reference.recurrence import naive_recurrent_kda


@pytest.mark.parametrize("argv, words", [
    (["--batch", "0"], "--batch must be >= 1"),
    (["--batch", "100000"], "absurd"),
    (["--batch", "x"], "--batch 'x'"),
    (["--design", "nope"], "unknown decode design 'nope'"),
    (["--design", "kdn_decode", "--state-dtype", "bf16"], "keeps its state in fp32"),
    (["--state-dtype", "fp16"], "the state is fp32 or bf16"),
    (["--design", "kdn_decode", "--tokens", "2"], "takes 1-1 tokens"),
    (["--chunk-size", "64"], "--chunk-size is an option of the prefill"),
    (["--version", "v3"], "--version is an option of the prefill"),
    (["--value-heads", "3", "--heads", "2"], "multiple of --heads"),
    (["--gate-lower-bound", "-5"], "needs --gate-in-kernel"),
    (["--design", "sgl_kda_decode", "--dk", "64"], "K = V = 128 only"),
    (["--design", "chunked", "--tokens", "32"], "takes 1-16 tokens"),
    (["--set", "chip.nope=1"], "no field chip.nope"),
    (["--seed", "-1"], "--seed must be in [0, 2**63)"),
    (["--plot", "/proc/decode.png"], "--plot"),
    (["--trace", "same.json", "--plot", "same.json"], "name one file"),
])
def test_bad_input_is_one_line(capsys, argv, words):
    assert main(argv + ["--no-numerics"]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_step_that_cannot_run_loses_nothing(capsys):
    """The chunked step's pairwise decays fit no tiling of a 16 KiB UB: named after the step that ran."""
    argv = ["--design", "step,chunked", "--tokens", "16", "--batch", "2", "--heads", "2", "--no-numerics",
            "--set", "core.ub_kib=16"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "KDA decode · step" in out and err.startswith("error: chunked B=2 T=16") and "fits no tiling" in err


def test_one_step_json(capsys):
    assert main(["--design", "step", "--batch", "2", "--heads", "2", "--dk", "32", "--dv", "32", "--prefill", "8",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["design"] == "step" and out["bound"] == "launch" and out["items"] == 4
    assert out["parity"]["output"]["pass"] and out["parity"]["after_prefill"]["longer_prefill_state"]["pass"]
    assert out["latency_us"] == pytest.approx(out["launch_us"] + out["device_us"])


def test_kda_run_decode_delegates(capsys):
    assert run_main(["--decode", "--batch", "0", "--no-numerics"]) == 2
    assert "--batch must be >= 1" in capsys.readouterr().err


def test_batch_sweep_names_the_crossover(capsys):
    assert main(["--design", "step", "--batch", "1:256", "--no-numerics"]) == 0
    out = capsys.readouterr().out
    assert "step (T=1, state fp32): launch-bound up to B = " in out and "HBM-bound from B = " in out


def test_fused_recurrent_kda_matches_the_recurrence():
    torch.manual_seed(0)
    B, T, H, HV, K = 3, 2, 2, 4, 32
    q, k = (F.normalize(torch.randn(B, T, H, K), dim=-1) for _ in range(2))
    v, g, beta = torch.randn(B, T, HV, K), F.logsigmoid(torch.randn(B, T, HV, K)), torch.rand(B, T, HV)
    h0 = torch.randn(5, HV, K, K) * 0.1
    idx = torch.tensor([4, 0, 2])
    o, ht = kda.fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                    ssm_state_indices=idx, design="chunked")
    o_ref, h_ref = naive_recurrent_kda(q.repeat_interleave(2, 2), k.repeat_interleave(2, 2), v, g, beta,
                                       initial_state=h0[idx], output_final_state=True, dtype=torch.float64)
    assert compare(o_ref, o).passed and compare(h_ref, ht).passed


@pytest.mark.parametrize("kwargs, words", [
    ({"chunk_size": 64}, "chunk_size is an option of chunk_kda"),
    ({"num_accepted_tokens": torch.ones(1)}, "not modelled"),
    ({"initial_state": torch.zeros(1, 1, 32, 32, dtype=torch.float16)}, "fp32 or bf16"),
    ({"initial_state": torch.zeros(1, 1, 16, 32)}, "initial_state must be [N, 1, 32, 32]"),
    ({"design": "v3"}, "unknown decode design"),
    ({"lower_bound": -5.0}, "needs use_gate_in_kernel"),
])
def test_fused_recurrent_kda_refuses(kwargs, words):
    x = [torch.zeros(1, 1, 1, 32)] * 3 + [torch.zeros(1, 1, 1, 32), torch.zeros(1, 1, 1)]
    with pytest.raises(kda.KdaInputError, match=None) as err:
        kda.fused_recurrent_kda(*x, **kwargs)
    assert words in str(err.value)


def test_its_files_are_written_whole_and_the_same_bytes(tmp_path, capsys):
    """The trace and the figure go out whole or not at all, and twice the same step gives the same bytes
    (the SVG's ids fixed)."""
    argv = ["--batch", "2", "--heads", "2", "--no-numerics"]
    shots = []
    for i in range(2):
        assert main([*argv, "--trace", str(tmp_path / f"t{i}.json"), "--plot", str(tmp_path / f"g{i}.svg")]) == 0
        shots.append(((tmp_path / f"t{i}.json").read_bytes(), (tmp_path / f"g{i}.svg").read_bytes()))
    assert shots[0] == shots[1] and all(len(b) > 100 for b in shots[0])
