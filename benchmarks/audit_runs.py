"""The parts of benchmarks/audit.py that run whole processes: interrupts (SIGINT to the process group, as a
terminal's Ctrl-C), closed pipes, determinism pairs and the deliberate bugs (audit_mutants.py)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audit_mutants import MUTANTS

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
BIG_RUN = ["kda.run", "--version", "all", "--dk", "64", "--dv", "64", "--chunks", "256"]


def _spec(path: Path, points: int = 24) -> Path:
    path.write_text(f'numerics = true\n[axes]\nseed = {list(range(points))}\nversion = ["v3"]\n[fixed]\nchunks = 64\n'
                    f'dk = 64\ndv = 64\n')
    return path


def _popen(module_argv: list[str], cwd: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *module_argv], cwd=cwd, env=ENV, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _result(cid, section, verdict, detail="", seconds=None):
    return {"id": cid, "section": section, "verdict": verdict, "detail": detail, "seconds": seconds}


# ---- interrupts ------------------------------------------------------------------------------------------
def interrupt_cases(fx: Path) -> list[tuple]:
    """(id, argv, seconds before SIGINT, what must survive: "stdout" the finished designs' report, "json" the
    same as JSON, "cache" the sweep's cache, "" nothing but one line)."""
    out = []
    for t in (0.3, 1.5, 5, 10):
        out.append((f"run-all@{t}s", BIG_RUN, t, "stdout"))
        out.append((f"run-all-json@{t}s", [*BIG_RUN, "--json"], t, "json"))
    out += [("run-backward@4s", ["kda.run", "--backward", "--version", "all", "--chunks", "128", "--dk", "64",
                                 "--dv", "64"], 4, "stdout"),
            ("run-uncertainty@6s", ["kda.run", "--version", "all", "--no-numerics", "--uncertainty", "200",
                                    "--heads", "8"], 6, "stdout")]
    spec = str(_spec(fx / "spec_interrupt.toml"))
    for t in (0.3, 3, 8, 15):
        out.append((f"sweep-dask@{t}s", ["kda.sweep", spec, "--workers", "2", "-o", "{out}/r.csv", "--quiet"], t,
                    "cache"))
    out += [("sweep-inprocess@6s", ["kda.sweep", spec, "--workers", "0", "-o", "{out}/r.csv", "--quiet"], 6, "cache"),
            ("sweep-nocache@6s", ["kda.sweep", spec, "--workers", "0", "--no-cache", "-o", "{out}/r.csv", "--quiet"],
             6, ""),
            ("validate@1s", ["kda.validate", "--samples", "4"], 1, ""),
            ("validate@10s", ["kda.validate", "--samples", "4"], 10, ""),
            ("calibrate@2s", ["npusim.calibrate", str(fx / "cal_good.csv")], 2, ""),
            ("calibrate@8s", ["npusim.calibrate", str(fx / "cal_good.csv")], 8, ""),
            ("attribution@2s", ["kda.attribution", "--chunks", "32"], 2, ""),
            ("attribution@6s", ["kda.attribution", "--chunks", "32"], 6, ""),
            ("stability@2s", ["kda.stability", "--no-thresholds"], 2, ""),
            ("stability@6s", ["kda.stability", "--no-thresholds"], 6, ""),
            ("plot@2s", ["kda.sweep", "plot", str(fx / "table.csv"), "--outdir", "{out}/p"], 2, "")]
    return out


def interrupts(fx: Path, quick: bool, log, only: str | None = None) -> list[dict]:
    cases = [c for c in interrupt_cases(fx) if not only or only in c[0]]
    if quick:
        cases = [c for c in cases if c[0] in ("run-all@5s", "sweep-inprocess@6s")]
    results = []
    for cid, argv, delay, keep in cases:
        with tempfile.TemporaryDirectory(prefix="audit-int-") as out:
            argv = [a.replace("{out}", out) for a in argv]
            t0 = time.monotonic()
            p = _popen(argv, Path(out))
            collect = _reading(p)        # from the start: when stdout's last byte came, before or after the signal
            time.sleep(delay)
            finished_first = p.poll() is not None
            if not finished_first:
                os.killpg(p.pid, signal.SIGINT)
            signalled = time.monotonic()
            try:
                stdout, last_out, stderr = collect(timeout=120)
                finished_first = finished_first or (p.returncode == 0 and last_out < signalled)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                results.append(_result(cid, "interrupts", "hang", "still running 120 s after Ctrl-C"))
                continue
            v, detail = _interrupt_verdict(p.returncode, stdout.decode(errors="replace"),
                                           stderr.decode(errors="replace"), keep, finished_first, Path(out))
            results.append(_result(cid, "interrupts", v, detail, round(time.monotonic() - t0, 1)))
            log(f"{v:14s} {cid}  {detail[:160]}")
    return results


def _reading(p: subprocess.Popen):
    """Read the process's stdout and stderr from now on; collect(timeout) waits for it and returns its stdout,
    when its last byte came (monotonic clock; -inf if none) and its stderr. A process that exits 0 after a
    Ctrl-C but had written all of its stdout before the signal was ending, not dropping it (a command that has
    said all it will ignores a late Ctrl-C while Python shuts down: npusim/command.py). The readers start
    with the process, or output written before the signal would be read, and timed, after it.
    subprocess.TimeoutExpired past `timeout`."""
    import threading
    got: dict[str, list] = {"out": [], "err": []}
    when = [-float("inf")]

    def read(stream, key):
        while True:
            data = os.read(stream.fileno(), 65536)
            if not data:
                return
            got[key].append(data)
            if key == "out":
                when[0] = time.monotonic()
    readers = [threading.Thread(target=read, args=(stream, key), daemon=True)
               for stream, key in ((p.stdout, "out"), (p.stderr, "err"))]
    for r in readers:
        r.start()

    def collect(timeout: float) -> tuple[bytes, float, bytes]:
        p.wait(timeout=timeout)
        for r in readers:
            r.join(timeout=10)
        return b"".join(got["out"]), when[0], b"".join(got["err"])
    return collect


def _interrupt_verdict(rc, out, err, keep, finished_first, where: Path) -> tuple[str, str]:
    if "Traceback" in err or "Exception ignored" in err:
        return "traceback", [x for x in err.splitlines() if x.strip()][-1]
    if finished_first:
        return "ok", "finished before the signal (or while its process was ending)"
    if rc == 0:
        return "silent", "Ctrl-C dropped: the run went on to the end and exited 0"
    if rc != 130:
        return "bad-exit", f"exit {rc} after Ctrl-C: {err.strip()[-200:]}"
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("warning:")]
    if len(lines) != 1:
        return "multi-line", " | ".join(lines[:3])
    if keep == "json" and out.strip():
        import json
        try:
            json.loads(out)
        except ValueError:
            return "lost", "the JSON on stdout is cut short"
    says_none = any(w in lines[0] for w in ("none", "no design", "no backward design", "nothing had finished"))
    if keep in ("stdout", "json") and not out.strip() and not says_none:
        return "lost", f"nothing on stdout and the line does not say none finished: {lines[0]}"
    if keep == "cache":
        m = re.search(r"(\d+) points? finished", lines[0])
        cached = sum(1 for f in where.glob("*.cache.jsonl") for _ in f.read_text().splitlines())
        if m and int(m.group(1)) > cached:
            return "lost", f"{lines[0]} but the cache holds {cached}"
    return "ok", lines[0]


# ---- closed pipes ----------------------------------------------------------------------------------------
def pipes(fx: Path, quick: bool, log) -> list[dict]:
    cases = [("run-json", [*BIG_RUN[:2], "v3", "--chunks", "4", "--dk", "16", "--dv", "16", "--json"]),
             ("run-all-text", ["kda.run", "--version", "all", "--no-numerics", "--chunks", "4"]),
             ("run-backward", ["kda.run", "--backward", "--chunks", "4", "--dk", "16", "--dv", "16"]),
             ("validate-json", ["kda.validate", "--samples", "0", "--data", str(fx / "val_good.csv"), "--json"]),
             ("calibrate", ["npusim.calibrate", str(fx / "cal_good.csv"), "--fields", "sync.latency_us"]),
             ("stability-json", ["kda.stability", "--versions", "v3", "--chunks", "1", "--no-thresholds", "--json"]),
             ("plot", ["kda.sweep", "plot", str(fx / "table.csv"), "--outdir", "{out}/p"]),
             ("sweep-nocache", ["kda.sweep", str(fx / "spec_good.toml"), "--workers", "0", "--no-cache", "-o",
                                "{out}/r.csv"])]
    if quick:
        cases = cases[:1]
    results = []
    for cid, argv in cases:
        with tempfile.TemporaryDirectory(prefix="audit-pipe-") as out:
            argv = [a.replace("{out}", out) for a in argv]
            p = _popen(argv, Path(out))
            p.stdout.read(40)            # `| head -c 40`: then the reader goes away
            p.stdout.close()
            try:
                _, err = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                results.append(_result(f"pipe-{cid}", "pipes", "hang"))
                continue
            err = err.decode(errors="replace")
            bad = "Traceback" in err or "Exception ignored" in err or "BrokenPipe" in err
            v = "traceback" if bad else "ok"
            results.append(_result(f"pipe-{cid}", "pipes", v, err.strip().splitlines()[-1] if bad else f"exit {p.returncode}"))
            log(f"{v:14s} pipe-{cid}")
    return results


# ---- determinism pairs -----------------------------------------------------------------------------------
def pair_cases(fx: Path) -> list[tuple]:
    s = ["--chunks", "4", "--dk", "16", "--dv", "16"]
    inputs = str(fx / "t_float32.pt")
    return [("run-v3-text", ["kda.run", *s], []), ("run-v3-json", ["kda.run", *s, "--json"], []),
            ("run-all-json", ["kda.run", "--version", "all", "--no-numerics", *s, "--json"], []),
            ("run-seqlens", ["kda.run", "--seqlens", "64,130", "--dk", "16", "--dv", "16", "--json"], []),
            ("run-trace", ["kda.run", *s, "--trace", "t.json"], ["t.json"]),
            ("run-png", ["kda.run", *s, "--plot", "x.png"], ["x.png"]),
            ("run-svg", ["kda.run", *s, "--plot", "x.svg"], ["x.svg"]),
            ("run-pdf", ["kda.run", *s, "--plot", "x.pdf"], ["x.pdf"]),
            ("run-uncertainty", ["kda.run", "--no-numerics", *s, "--uncertainty", "4", "--json"], []),
            ("run-backward", ["kda.run", "--backward", *s, "--json"], []),
            ("run-backward-trace", ["kda.run", "--backward", *s, "--trace", "t.json"], ["t.json"]),
            ("run-v5-plot", ["kda.run", "--version", "v5", *s, "--plot", "x.png"], ["x.png"]),
            ("run-inputs", ["kda.run", "--inputs", inputs, "--chunk-size", "16", "--json"], []),
            ("run-interleave", ["kda.run", "--no-numerics", *s, "--heads", "4", "--interleave", "2", "--json"], []),
            ("run-value-heads", ["kda.run", *s, "--heads", "2", "--value-heads", "4", "--json"], []),
            ("sweep-csv", ["kda.sweep", str(fx / "spec_good.toml"), "--workers", "0", "--no-cache", "-o", "r.csv",
                           "--quiet"], ["r.csv"]),
            ("sweep-parquet", ["kda.sweep", str(fx / "spec_good.toml"), "--workers", "0", "--no-cache", "-o",
                               "r.parquet", "--quiet"], ["r.parquet"]),
            ("sweep-plot", ["kda.sweep", "plot", str(fx / "table.csv"), "--outdir", "p"], ["p/pareto.png", "p/best.md"]),
            ("validate-json", ["kda.validate", "--samples", "4", "--data", str(fx / "val_good.csv"), "--json"], []),
            ("validate-svg", ["kda.validate", "--samples", "0", "--data", str(fx / "val_good.csv"), "--plot", "v.svg"],
             ["v.svg"]),
            ("calibrate", ["npusim.calibrate", str(fx / "cal_good.csv"), "--fields", "sync.latency_us", "--date",
                           "2026-01-01", "--out", "f.toml"], ["f.toml"]),
            ("stability-json", ["kda.stability", "--versions", "v3", "--chunks", "2", "--no-thresholds", "--json"], []),
            ("attribution", ["kda.attribution", "--chunks", "2"], [])]


def pairs(fx: Path, quick: bool, log) -> list[dict]:
    cases = pair_cases(fx)
    if quick:
        cases = [c for c in cases if c[0] in ("run-svg", "sweep-csv")]
    results = []
    for cid, argv, files in cases:
        with tempfile.TemporaryDirectory(prefix="audit-pair-") as out:
            where = Path(out)
            got = []
            for _ in range(2):
                p = _popen(argv, where)
                stdout, stderr = p.communicate(timeout=600)
                got.append((p.returncode, stdout, [(where / f).read_bytes() if (where / f).exists() else None
                                                   for f in files]))
                for f in files:
                    if (where / f).exists():
                        (where / f).unlink()
            (rc1, out1, f1), (rc2, out2, f2) = got
            differ = [f for f, a, b in zip(files, f1, f2) if a != b or a is None]
            if rc1 != rc2 or out1 != out2 or differ:
                v, detail = "silent", f"differs: {'stdout ' if out1 != out2 else ''}{' '.join(differ)} (exit {rc1}, {rc2})"
            else:
                v, detail = "ok", f"exit {rc1}"
            results.append(_result(f"pair-{cid}", "pairs", v, detail))
            log(f"{v:14s} pair-{cid}  {detail}")
    return results


# ---- deliberate bugs -------------------------------------------------------------------------------------
def mutants(log, only: str | None = None) -> list[dict]:
    results = []
    for m in MUTANTS:
        if only and only not in m["id"]:
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="audit-mut-") as tmp:
            copy = Path(tmp) / "tree"
            shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "site", "*.egg-info",
                                                                       "__pycache__", ".pytest_cache", "notebooks"))
            path = copy / m["file"]
            text = path.read_text(encoding="utf-8")
            if text.count(m["old"]) != 1:
                results.append(_result(f"mutant-{m['id']}", "mutants", "crash",
                                       f"the code to break is not in {m['file']} exactly once: the list is stale"))
                continue
            path.write_text(text.replace(m["old"], m["new"]), encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": str(copy)}
            p = subprocess.run([sys.executable, "-m", "pytest", *m["tests"], "-x", "-q", "-p", "no:cacheprovider",
                                "-o", "addopts="], cwd=copy, env=env, capture_output=True, text=True, timeout=3600)
        lines = p.stdout.splitlines()
        tail = [x for x in lines if x.startswith("FAILED")] or [x for x in lines if " failed" in x and "passed" in x]
        if p.returncode == 1:
            v, detail = "killed", (tail[0] if tail else "failed")
        elif p.returncode == 0:
            v, detail = "survived", "every test passed with the bug in"
        else:
            v, detail = "crash", f"pytest exit {p.returncode}: {p.stdout[-300:]}"
        results.append(_result(f"mutant-{m['id']}", "mutants", v, detail, round(time.monotonic() - t0, 1)))
        log(f"{v:14s} mutant-{m['id']}  {detail[:160]}")
    return results
