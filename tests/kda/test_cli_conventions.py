"""What the command lines share (kda/cli/common.py): the name as invoked, help for every option in groups,
a console that does not cut tables in pipes, the trace's size warning and window."""
import json
import signal
import sys

import pytest

from kda.cli import common
from kda.cli.run import main
from kda.cli.run_options import build_parser


def test_every_option_has_help_and_a_group():
    p = build_parser()
    groups = {g.title: [a.dest for a in g._group_actions] for g in p._action_groups}
    assert {"shape", "design", "model", "output"} <= set(groups)
    for a in p._actions:
        if a.dest != "help":
            assert a.help, f"--{a.dest} has no help"
            assert any(a.dest in dests for t, dests in groups.items() if t in ("shape", "design", "model", "output"))
    text = p.format_help()
    assert "examples:" in text and "issue" not in text


@pytest.mark.parametrize("argv0, expected", [("/usr/bin/kda-run", "kda-run"),
                                             ("/x/kda/run.py", "python -m kda.run"),
                                             ("-c", "python -m kda.run")])
def test_the_program_is_named_as_invoked(monkeypatch, argv0, expected):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert common.prog_name("kda.run") == expected
    assert build_parser().prog == expected


def test_a_bad_option_names_the_program_as_invoked(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/kda-run"])
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["--chunks", "x"])
    finally:    # as the console script, the command ignores a late Ctrl-C once it ends: not pytest's process
        signal.signal(signal.SIGINT, handler)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kda-run: argument --chunks") and err.count("\n") == 1


def test_a_pipe_gets_the_full_width_and_columns_win(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert common.console().width > 200             # pytest's stdout is not a terminal
    monkeypatch.setenv("COLUMNS", "97")
    assert common.console().width == 97


def test_the_trace_window_cuts_the_trace(tmp_path, capsys):
    full, cut = tmp_path / "full.json", tmp_path / "cut.json"
    base = ["--version", "v3", "--chunks", "32", "--no-numerics"]
    assert main(base + ["--trace", str(full)]) == 0
    assert main(base + ["--trace", str(cut), "--trace-window", "0:10"]) == 0
    slices = [e for e in json.loads(cut.read_text())["traceEvents"] if e["ph"] == "X"]
    every = [e for e in json.loads(full.read_text())["traceEvents"] if e["ph"] == "X"]
    assert slices and all(e["ts"] <= 10 for e in slices)
    assert len(slices) == sum(e["ts"] <= 10 and e["ts"] + e["dur"] >= 0 for e in every)


@pytest.mark.parametrize("extra, message", [(["--trace-window", "0:10"], "needs --trace"),
                                            (["--trace", "t.json", "--trace-window", "10"], "START:END")])
def test_bad_trace_windows_are_one_line(capsys, extra, message):
    assert main(["--chunks", "2", "--no-numerics"] + extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_large_trace_holds_its_first_part_unless_a_window_is_asked(tmp_path, capsys, monkeypatch):
    from npusim.output import chrome_trace, trace_file
    args = ["--version", "v3", "--chunks", "8", "--no-numerics", "--trace"]
    assert main(args + [str(tmp_path / "all.json"), "--trace-window", "0:"]) == 0
    events = json.loads((tmp_path / "all.json").read_text())["traceEvents"]
    every = [e for e in events if e["ph"] != "M"]
    names = [e for e in events if e["ph"] == "M"]                  # every part holds them
    limit = len(json.dumps(names)) + trace_file.estimate_bytes({"traceEvents": every}) // 4
    capsys.readouterr()
    monkeypatch.setattr(trace_file, "LARGE_BYTES", limit)
    assert main(args + [str(tmp_path / "cut.json")]) == 0
    err = capsys.readouterr().err
    assert "the whole trace would be about" in err and err.index("--trace-window 0:") < err.index("wrote")
    cut = json.loads((tmp_path / "cut.json").read_text())
    end = cut["metadata"]["window_us"][1]
    kept = [e for e in cut["traceEvents"] if e["ph"] != "M"]
    # every event of the chunks that start up to the window's end (the arrows' both ends among them), the
    # counters up to it: about a quarter of the events, in time order
    chunks = {e["args"]["chunk"] for e in every if e.get("cat", "").startswith("phase") and e["ts"] <= end}
    assert kept == [e for e in every if (e["args"]["chunk"] in chunks if "chunk" in e["args"] else e["ts"] <= end)]
    assert 0.15 < len(kept) / len(every) < 0.4
    assert chrome_trace.check(cut) == []


def test_a_trace_kept_only_for_its_file_leaves_the_report_as_a_run_without_it(tmp_path, capsys, monkeypatch):
    from kda.cli import run_options
    args = ["--version", "v3", "--chunks", "8", "--no-numerics"]
    assert main(args) == 0
    small = capsys.readouterr().out
    assert "Overlap" in small                   # 8 chunks x 20 events: the run keeps its trace unasked
    monkeypatch.setattr(run_options, "MAX_KEPT_EVENTS", 100)        # now it keeps none unless a file asks
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main(args + ["--trace", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png")]) == 0
    assert capsys.readouterr().out == plain and "Overlap" not in plain
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_a_table_is_its_columns():
    from rich.console import Console

    from kda.views.table import Column, ms, signed_pct, table
    rows = [{"id": "a", "us": 1500.0, "err": 0.25}, {"id": "b", "us": float("nan"), "err": -0.5}]
    cols = [Column("id", lambda r: r["id"], "left"), Column("time", lambda r: ms(r["us"])),
            Column("error", lambda r: signed_pct(r["err"])), Column("hidden", lambda r: "x", when=False)]
    con = Console(width=100, record=True)
    con.print(table("T", cols, rows))
    text = con.export_text()
    assert "1.500 ms" in text and "+25%" in text and "-50%" in text and "hidden" not in text
    assert [line.split()[:2] for line in text.splitlines() if line.strip().startswith("b")] == [["b", "-"]]


def test_markdown_tables_keep_their_cells():
    from kda.views.table import markdown
    text = markdown([("v3", "0.50", "1,234 ms")], ("design", "ratio", "latency")).splitlines()
    assert len(text) == 3 and text[0].split("|")[1].strip() == "design"
    assert [c.strip() for c in text[2].split("|")[1:-1]] == ["v3", "0.50", "1,234 ms"]   # "0.50" not re-formatted


def test_progress_goes_to_stderr_and_leaves_stdout_clean(monkeypatch, capsys):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    with common.progress(True, total=100) as tick:
        for i in range(100):
            tick(i + 1, 100)
    assert capsys.readouterr().out == ""
    assert "chunks" in err.getvalue()


@pytest.mark.parametrize("version, extra", [("fla", {}), ("v5", {}), ("v6", {"heads": 2, "value_heads": 8})])
def test_the_memory_table_fits_a_120_column_terminal(version, extra):
    """The widest memory tables (fla's long pass names, v5's two passes, grouped value heads in parts) print in
    120 columns whole: no cell cut with an ellipsis on a terminal of that width."""
    from rich.console import Console

    from kda.settings import Settings
    from kda.studies.evaluate import evaluate
    from kda.views.render_memory import memory_table
    r = evaluate(version, Settings(chunks=2, **extra), timing=True)
    wide, narrow = Console(width=400, record=True), Console(width=120, record=True)
    for c in (wide, narrow):
        c.print(memory_table(r))
    body = [line for line in narrow.export_text().splitlines() if "/" in line]
    assert body and "…" not in narrow.export_text()
    assert max(len(line.rstrip()) for line in wide.export_text().splitlines()[3:]) <= 120


def test_op_summary_rows_add_up_to_the_reported_latency(tmp_path, capsys):
    import csv
    out = tmp_path / "fla.csv"
    assert main(["--version", "fla", "--chunks", "2", "--no-numerics", "--json", "--op-summary", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)["layer"]
    rows = list(csv.DictReader(out.open()))
    passes = [r for r in rows if r["block_id"] == "all"]
    assert [r["Op Name"] for r in passes] == [p["name"] for p in report["passes"]]
    for row, p in zip(passes, report["passes"]):
        assert float(row["Task Duration(us)"]) == pytest.approx(p["makespan_us"], abs=1e-3)
        assert int(row["Block Dim"]) == p["cores"]
    # six launches of 20 us (the profile's chip.launch_overhead_us), each pass's device time between them
    total = sum(float(r["Task Duration(us)"]) for r in passes) + 20.0 * report["launches"]
    assert total == pytest.approx(report["latency_us"], abs=1e-3 * len(passes))
    for p in passes:                        # a pass row, then one row per core of it
        cores = [r for r in rows if r["Op Name"] == p["Op Name"] and r["block_id"] != "all"]
        assert len(cores) == int(p["Block Dim"])


def test_op_summary_needs_a_csv_of_its_own(capsys):
    assert main(["--chunks", "2", "--no-numerics", "--op-summary", "x.txt"]) == 2
    assert "--op-summary x.txt: the file must end in .csv" in capsys.readouterr().err
