"""python -m kda.run --inputs FILE --seqlens ...: FLA's variable-length layout. The file holds one row
[1, total tokens, H, ...] that --seqlens cuts into sequences (docs/reference/cli.md: "seqlens that ... do not
sum to the inputs' T" are bad input). A file that fits runs every design; one that does not is one line and
exit 2 before any design runs, whichever designs were asked for."""
import json

import pytest
import torch
import torch.nn.functional as F

from kda.cli.run import main

H, K, V = 2, 16, 16


def _inputs(tmp_path, batch: int = 1, tokens: int = 100, states: int | None = None):
    gen = torch.Generator().manual_seed(0)
    shape = (batch, tokens, H)
    data = {"q": torch.randn(*shape, K, generator=gen), "k": F.normalize(torch.randn(*shape, K, generator=gen), dim=-1),
            "v": torch.randn(*shape, V, generator=gen), "g": F.logsigmoid(torch.randn(*shape, K, generator=gen)),
            "beta": torch.rand(*shape, generator=gen)}
    if states is not None:
        data["initial_state"] = torch.randn(states, H, K, V, generator=gen)
    path = tmp_path / "x.pt"
    torch.save(data, path)
    return str(path)


def test_a_file_that_fits_the_seqlens_runs_them_as_separate_sequences(tmp_path, capsys):
    path = _inputs(tmp_path, states=2)
    assert main(["--inputs", path, "--seqlens", "50,50", "--version", "v6", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["seqlens"], d["tokens"], d["heads"], d["d_k"], d["d_v"]) == ([50, 50], 100, H, K, V)
    assert d["chunks"] == 1              # chunks of 64 within each sequence; one of 100 tokens would need 2
    assert d["parity"]["pass"]
    # the timing is that of any inputs of these shapes
    assert main(["--seqlens", "50,50", "--heads", str(H), "--dk", str(K), "--dv", str(V), "--version", "v6",
                 "--no-numerics", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layer"]["latency_us"] == pytest.approx(d["layer"]["latency_us"])


def test_the_backward_takes_the_same_layout(tmp_path, capsys):
    assert main(["--inputs", _inputs(tmp_path), "--seqlens", "10,90", "--backward", "--version", "v6"]) == 0
    assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("make, seqlens, needle", [
    (dict(), "10,80", "--seqlens sums to 90 tokens"),
    (dict(batch=2, tokens=50), "40,60", "[1, total tokens, H, K]"),
    (dict(states=1), "10,90", "one state per sequence (2 in --seqlens)"),
])
def test_a_file_that_does_not_fit_is_one_line_before_any_design_runs(tmp_path, capsys, make, seqlens, needle,
                                                                       backward):
    argv = ["--inputs", _inputs(tmp_path, **make), "--seqlens", seqlens, "--version", "all"]
    assert main(argv + ["--backward"] * backward) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "--inputs" in err[0], err
    assert captured.out == ""
