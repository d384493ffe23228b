"""python benchmarks/audit.py [--quick] [--sections cli,api,interrupts,pipes,pairs,mutants] [--timeout 120]
[--json OUT.json]

The project's promise against a hostile user, checked the way one would try it on a fresh clone: bad input
gets a report, or one line and exit status 2, within a bounded time; never a traceback, a hang or a silently
wrong answer; Ctrl-C and a closed pipe lose nothing already computed; the same inputs give the same bytes;
and the deliberate bugs of benchmarks/audit_mutants.py each fail a test.

- cli: every entry point's bad command lines (benchmarks/audit_cases.py), run in worker processes that
  import the tools once; a case past `--timeout` seconds is a hang (its worker is killed and replaced).
- api: bad calls of kda.chunk_kda, fla-core's signature, kda.execute and recurrent_kda: a result, or
  KdaInputError (an NpuSimError where a work limit refuses) with a one-line message.
- interrupts, pipes: SIGINT to the process group at set times; stdout closed early (`| head`).
- pairs: the same command twice gives the same bytes (stdout, traces, figures, tables, profiles).
- mutants: each deliberate bug in a copy of the tree must fail the tests named for it.

A case whose `expect` is "refuse" (wrong input) and that ends with a report is silently accepted: a defect.
`--quick` runs a fixed subset (every eighth case, two interrupts, one pipe, two pairs, no mutants): what CI
runs (tests/test_audit.py). Exit status 1 when any defect is found. Slow: the whole audit takes an hour or
more on two cores.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_cases  # noqa: E402
import audit_runs  # noqa: E402

GOOD = {"report", "refusal", "refused", "ok"}


# ---- the worker: runs cases in this process, one JSON line in and out -------------------------------------
def worker(fx: str) -> int:
    """Read cases (JSON lines) on stdin; write each one's outcome as a JSON line on the real stdout."""
    real = os.fdopen(os.dup(1), "w")
    sys.stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    for line in sys.stdin:
        case = json.loads(line)
        with tempfile.TemporaryDirectory(prefix="audit-") as out:
            result = _run_cli(case, fx, out) if case["kind"] == "cli" else _run_api(case)
        real.write(json.dumps({"id": case["id"], **result}) + "\n")
        real.flush()
    return 0


def _fill(arg: str, fx: str, out: str) -> str:
    return arg.replace("{fx}", fx).replace("{out}", out)


def _run_cli(case: dict, fx: str, out: str) -> dict:
    argv = [_fill(a, fx, out) for a in case["argv"]]
    main = importlib.import_module(case["module"]).main
    stdout, stderr = io.StringIO(), io.StringIO()
    exc = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2 if e.code else 0
        except BaseException as e:  # noqa: BLE001 - what escapes main is the finding
            code, exc = None, "".join(traceback.format_exception_only(type(e), e)).strip()
    return {"code": code, "out": stdout.getvalue()[-4000:], "err": stderr.getvalue()[-4000:], "exc": exc}


def _run_api(case: dict) -> dict:
    import warnings
    ns: dict = {}
    exec(audit_cases.API_PRELUDE, ns)
    *body, last = case["code"].strip().splitlines()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec("\n".join(body), ns)
            value = eval(last, ns)
        except BaseException as e:  # noqa: BLE001
            return {"raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                    "message": str(e)[:600], "warnings": [str(w.message)[:300] for w in caught]}
    import torch
    said = [str(w.message)[:300] for w in caught]
    if hasattr(value, "nonfinite"):            # kda.execute: the Execution says where inf/NaN appeared
        if value.nonfinite is not None:
            said.append(f"inf/NaN in {value.nonfinite} (Execution.nonfinite; v4, v6: the safe designs)")
        value = (value.o, value.final_state)
    tensors = [t for t in (value if isinstance(value, (tuple, list)) else [value]) if isinstance(t, torch.Tensor)]
    finite = all(bool(torch.isfinite(t.float()).all()) for t in tensors if t.numel() and not t.is_meta)
    return {"raised": None, "finite": finite, "warnings": said}


# ---- the parent: workers with a time limit each, and the verdicts -----------------------------------------
class Pool:
    """One worker process at a time per group of cases; a case that takes longer than `timeout` kills it."""

    def __init__(self, fx: Path, timeout: float):
        self.fx, self.timeout, self.proc = fx, timeout, None

    def _start(self):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", str(self.fx)], cwd=self.fx,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env)

    def run(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        t0 = time.monotonic()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.close()
            return {"verdict": "hang", "seconds": round(time.monotonic() - t0, 1)}
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait()
            self.proc = None
            return {"verdict": "crash", "detail": f"the worker died (status {rc}: killed for memory?)",
                    "seconds": round(time.monotonic() - t0, 1)}
        result = json.loads(line)
        result["seconds"] = round(time.monotonic() - t0, 1)
        return result

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def cli_verdict(case: dict, r: dict) -> tuple[str, str]:
    """(verdict, detail): report, refusal, or a defect: traceback, multi-line, silent, bad-exit, hang, crash."""
    if "verdict" in r:
        return r["verdict"], r.get("detail", "")
    err = r["err"]
    if r["exc"] or "Traceback" in err:
        return "traceback", r["exc"] or err.strip().splitlines()[-1]
    lines = [x for x in err.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    if r["code"] == 2:
        if not errors:
            return "bad-refusal", (lines or ["(nothing on stderr)"])[-1]
        if not r["out"].strip() and len(errors) != 1:
            return "multi-line", " | ".join(errors[:3])
        if case["expect"] == "report" and not r["out"].strip():
            return "refused-valid", errors[0]
        return "refusal", errors[0]
    if r["code"] in (0, 1):
        if case["expect"] == "refuse":
            return "silent", f"exit {r['code']} on bad input"
        return "report", ""
    return "bad-exit", f"exit status {r['code']}"


def api_verdict(case: dict, r: dict) -> tuple[str, str]:
    if "verdict" in r:
        return r["verdict"], r.get("detail", "")
    if r["raised"] and case["expect"] == "torch":     # torch's own argument check, before the project's code runs
        one_line = "\n" not in r["message"].strip()
        return ("refused", f"torch: {r['message'][:200]}") if one_line else ("multi-line", r["message"][:200])
    if r["raised"]:
        named = {"KdaInputError", "NpuSimError"} & set(r["mro"])
        if not named:
            return "crash", f"{r['raised']}: {r['message'].splitlines()[0] if r['message'] else ''}"
        if "\n" in r["message"].strip():
            return "multi-line", r["message"][:200]
        return ("refused-valid" if case["expect"] == "ok" else "refused"), f"{r['raised']}: {r['message'][:200]}"
    says_nan = any("inf/NaN" in w for w in r["warnings"])
    if says_nan and r["finite"] and not any("finite" in w for w in r["warnings"]):
        return "misleading", "warns of inf/NaN, the output is finite"
    if not r["finite"] and not says_nan:
        return "silent", "inf/NaN returned without a warning"
    if says_nan and any("chunk_kda" in w for w in r["warnings"]) and \
            not any(v in w for w in r["warnings"] for v in ("v4", "v6")):
        return "misleading", "an overflow warning that names no safe design"
    if case["expect"] == "refuse":
        return "silent", "accepted: " + "; ".join(r["warnings"])[:200]
    return "ok", ""


DEFECTS = {"traceback", "hang", "crash", "multi-line", "silent", "bad-exit", "bad-refusal", "misleading", "lost",
           "survived"}


def run_cases(cases: list[dict], fx: Path, timeout: float, verdict, log) -> list[dict]:
    pools: dict[str, Pool] = {}
    results = []
    try:
        for case in cases:
            group = case.get("module", "api")
            pool = pools.setdefault(group, Pool(fx, timeout))
            r = pool.run(case)
            v, detail = verdict(case, r)
            results.append({"id": case["id"], "section": case["kind"], "verdict": v, "detail": detail,
                            "seconds": r.get("seconds")})
            log(f"{v:14s} {r.get('seconds', 0):6.1f}s  {case['id'][:90]}" + (f"  -- {detail[:160]}" if v in DEFECTS else ""))
    finally:
        for p in pools.values():
            p.close()
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/audit.py", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the subset CI runs")
    ap.add_argument("--sections", default="cli,api,interrupts,pipes,pairs,mutants")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a case may take before it is a hang")
    ap.add_argument("--only", help="run only the cases whose id contains this text")
    ap.add_argument("--json", type=Path, help="write every verdict here")
    ap.add_argument("--quiet", action="store_true", help="only the summary and the defects")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    sections = set(args.sections.split(","))
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="audit-fx-") as tmp:
        fx = Path(tmp)
        audit_cases.make_fixtures(fx)
        pick = (lambda xs: xs[::8]) if args.quick else (lambda xs: xs)
        only = (lambda xs: [x for x in xs if args.only in x["id"]]) if args.only else (lambda xs: xs)
        if "cli" in sections:
            results += run_cases(only(pick(audit_cases.cli_cases())), fx, args.timeout, cli_verdict, log)
        if "api" in sections:
            results += run_cases(only(pick(audit_cases.api_cases())), fx, args.timeout, api_verdict, log)
        if "interrupts" in sections:
            results += audit_runs.interrupts(fx, args.quick, log, args.only)
        if "pipes" in sections:
            results += audit_runs.pipes(fx, args.quick, log)
        if "pairs" in sections:
            results += audit_runs.pairs(fx, args.quick, log)
        if "mutants" in sections and not args.quick:
            results += audit_runs.mutants(log, args.only)
    return report(results, args.json)


def report(results: list[dict], out: Path | None) -> int:
    by = Counter((r["section"], r["verdict"]) for r in results)
    print("\nsection      cases  " + "  ".join(f"{v}" for v in sorted({v for _, v in by})))
    for section in dict.fromkeys(r["section"] for r in results):
        n = sum(c for (s, _), c in by.items() if s == section)
        print(f"{section:12s} {n:5d}  " + ", ".join(f"{v} {c}" for (s, v), c in sorted(by.items()) if s == section))
    defects = [r for r in results if r["verdict"] in DEFECTS]
    print(f"\n{len(results)} cases, {len(defects)} defects")
    for r in defects:
        print(f"  {r['section']:10s} {r['verdict']:12s} {r['id'][:80]}: {r['detail'][:200]}")
    if out is not None:
        out.write_text(json.dumps(results, indent=1))
    return 1 if defects else 0


if __name__ == "__main__":
    raise SystemExit(main())
