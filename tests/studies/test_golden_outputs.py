"""Every output of `python -m kda.run` stays byte-identical across refactors: the text report, the JSON, the
Chrome trace and the plot of one-pass designs (v3, v6), designs of several passes (fla, v5), all designs at
once and the backward, at small shapes and without numerics (the timing path is exact arithmetic, the same
on every machine). The text and JSON are kept in full under tests/data/golden/, the traces and plots as
SHA-256 digests (golden.json); a plot is compared only under the matplotlib version that froze it.

Refreeze after a change meant to move an output (a recalibrated profile, a new report line):
    python tests/studies/test_golden_outputs.py --update
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"
SMALL = ["--chunks", "4", "--heads", "2", "--no-numerics"]

# name -> (arguments, outputs: "text", "json", "trace", "plot")
CASES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "v3": (["--version", "v3", *SMALL], ("text", "json", "trace", "plot")),
    "v3_serial": (["--version", "v3", "--serial", *SMALL], ("trace", "plot")),
    "v3_seqlens": (["--version", "v3", "--seqlens", "100,200", "--no-numerics"], ("text", "json")),
    "v6": (["--version", "v6", "--cores", "1", "--interleave", "2", *SMALL], ("text", "json", "trace", "plot")),
    "fla": (["--version", "fla", *SMALL], ("text", "json", "trace", "plot")),
    "v5": (["--version", "v5", *SMALL], ("text", "json", "trace", "plot")),
    "v5_serial": (["--version", "v5", "--serial", *SMALL], ("trace", "plot")),
    "all": (["--version", "all", "--chunks", "2", "--no-numerics"], ("text", "json", "trace", "plot")),
    "backward": (["--backward", "--version", "v6", *SMALL], ("text", "json", "trace", "plot")),
    "backward_all": (["--backward", "--version", "all", "--chunks", "2", "--no-numerics"], ("text", "json")),
}


def _run(args: list[str], tmp: Path) -> dict[str, bytes]:
    """The case's outputs as bytes: stdout of the text and the --json run, the trace and the plot files."""
    from kda.cli.run import main
    out: dict[str, bytes] = {}
    files = ["--trace", str(tmp / "trace.json"), "--plot", str(tmp / "plot.png")]
    for kind, extra in (("text", files), ("json", ["--json"])):
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            status = main([*args, *extra])
        assert status == 0, err.getvalue()
        out[kind] = buf.getvalue().encode()
    out["trace"] = (tmp / "trace.json").read_bytes()
    out["plot"] = (tmp / "plot.png").read_bytes()
    return out


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest() -> dict:
    return json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)          # the tables at their natural width, as in a pipe


@pytest.mark.parametrize("name", list(CASES))
def test_the_outputs_are_byte_identical(name, tmp_path):
    import matplotlib
    args, kinds = CASES[name]
    now = _run(args, tmp_path)
    manifest = _manifest()
    for kind in kinds:
        if kind in ("text", "json"):
            frozen = (GOLDEN / f"{name}.{'txt' if kind == 'text' else 'json'}").read_bytes()
            assert now[kind].decode() == frozen.decode(), f"{name}: the {kind} output moved"
        elif kind == "trace" or manifest["matplotlib"] == matplotlib.__version__:
            assert _digest(now[kind]) == manifest["digests"][f"{name}.{kind}"], f"{name}: the {kind} moved"


def update() -> None:
    """Freeze the outputs of this tree."""
    import tempfile

    import matplotlib
    GOLDEN.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, (args, kinds) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            now = _run(args, Path(tmp))
        for kind in kinds:
            if kind in ("text", "json"):
                (GOLDEN / f"{name}.{'txt' if kind == 'text' else 'json'}").write_bytes(now[kind])
            else:
                digests[f"{name}.{kind}"] = _digest(now[kind])
        print(f"froze {name}", file=sys.stderr)
    (GOLDEN / "golden.json").write_text(json.dumps({"matplotlib": matplotlib.__version__, "digests": digests},
                                                   indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/studies/test_golden_outputs.py --update")
    import os
    os.environ.pop("COLUMNS", None)
    update()
