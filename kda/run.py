"""python -m kda.run --version v3 --chunks 16

Runs KDA phase programs on the simulated Ascend NPU with real tensor math, checks them against the
fp64 recurrence, and reports hand-offs, bytes and latency (serial and pipelined over many chunks).
Bad input gets one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

from npusim import DataflowError, NpuSimError, load_profile, shipped_profiles

from .api import KdaInputError
from .evaluate import Settings, evaluate, make_settings_inputs, reference
from .inputs import GATES, KdaInputs
from .programs import PROGRAMS


class _Parser(argparse.ArgumentParser):
    def error(self, message):               # one line, exit 2 (argparse prints usage too)
        raise SystemExit(_fail(f"{self.prog}: {message}"))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m kda.run", description=__doc__.split("\n\n")[1],
                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--version", default="v3", help=f"phase program: {', '.join(PROGRAMS)} or all")
    p.add_argument("--chunks", type=int, default=16, help="chunks per sequence")
    p.add_argument("--tokens", type=int, default=None, help="tokens per sequence instead of --chunks (any T)")
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--chunk-size", type=int, default=64)
    p.add_argument("--dk", type=int, default=128)
    p.add_argument("--dv", type=int, default=128)
    p.add_argument("--dtype", default="bf16", choices=("fp32", "bf16", "fp16"), help="transfer type of every hand-off")
    p.add_argument("--profile", default="ascend-910b2", help=f"{', '.join(shipped_profiles())} or a .toml path")
    p.add_argument("--gates", default="seed", choices=GATES,
                   help="seed: sigmoid(randn); kimi: -5*sigmoid(x); strong: alpha=0.01; slow: long memories")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-state", choices=("zero", "randn"), default="zero")
    p.add_argument("--inputs", type=Path, help="a .pt file with q, k, v, beta and g (log decay) or alpha, "
                   "in FLA's layout [B, T, H, ...], optionally initial_state; replaces the generated inputs")
    p.add_argument("--state-handoff", choices=("ride", "own"), default="ride",
                   help="the state rides on an existing sync of the right direction, or has its own")
    p.add_argument("--slots", type=int, help="ping/pong slots (override the profile)")
    p.add_argument("--slot-kib", type=float, help="slot size in KiB (override the profile)")
    p.add_argument("--resident-kib", type=float, help="resident region in KiB (override the profile)")
    p.add_argument("--resident", help="comma-separated tensors for the workspace's resident region, replacing "
                   "the program's plan ('none' for none)")
    p.add_argument("--serial", action="store_true", help="show the serial (no overlap) timeline as the main one")
    p.add_argument("--json", action="store_true", help="print one JSON object (a list with --version all)")
    p.add_argument("--strict", action="store_true", help="exit 1 if any version fails parity or overflows")
    return p


def _settings(args) -> Settings:
    checks = {"--chunks": args.chunks, "--heads": args.heads, "--batch": args.batch,
              "--chunk-size": args.chunk_size, "--dk": args.dk, "--dv": args.dv}
    for flag, value in checks.items():
        if value < 1:
            raise KdaInputError(f"{flag} must be >= 1, got {value}")
    if args.tokens is not None and args.tokens < 1:
        raise KdaInputError(f"--tokens must be >= 1, got {args.tokens}")
    workspace = {k: v for k, v in (("slots", args.slots), ("slot_kib", args.slot_kib),
                                   ("resident_kib", args.resident_kib)) if v is not None}
    resident = None
    if args.resident is not None:
        resident = () if args.resident.strip() in ("", "none") else tuple(
            x.strip() for x in args.resident.split(",") if x.strip())
    return Settings(resident=resident, batch=args.batch, heads=args.heads, chunks=args.chunks, chunk_size=args.chunk_size,
                    d_k=args.dk, d_v=args.dv, dtype=args.dtype, gates=args.gates, seed=args.seed,
                    profile=str(args.profile), state_handoff=args.state_handoff,
                    initial_state=args.initial_state == "randn", tokens=args.tokens, workspace=workspace)


def load_inputs(path: Path) -> KdaInputs:
    """User inputs from a .pt file; the shapes set batch, tokens, heads, d_k and d_v."""
    if not path.is_file():
        raise KdaInputError(f"--inputs {path}: no such file")
    try:
        data = torch.load(path, weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the same user error
        raise KdaInputError(f"--inputs {path}: cannot read it as a torch file ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise KdaInputError(f"--inputs {path}: expected a dict of tensors")
    missing = [k for k in ("q", "k", "v", "beta") if k not in data]
    if missing or ("g" not in data and "alpha" not in data):
        raise KdaInputError(f"--inputs {path}: missing {', '.join(missing) or 'g or alpha'}")
    g = data.get("g")
    if g is None:
        alpha = data["alpha"].float()
        if bool(torch.isnan(alpha).any()):
            raise KdaInputError("alpha contains NaN")
        bad = (alpha <= 0) | (alpha > 1)
        if bool(bad.any()):
            raise KdaInputError(f"decay alpha must lie in (0, 1]; {int(bad.sum())} values do not "
                                f"(min {float(alpha.min()):.4g}, max {float(alpha.max()):.4g})")
        g = alpha.log()
    return KdaInputs(data["q"], data["k"], data["v"], g, data["beta"], data.get("initial_state"))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    versions = list(PROGRAMS) if args.version == "all" else [args.version]
    if args.version != "all" and args.version not in PROGRAMS:
        return _fail(f"unknown version {args.version!r}: choose from {', '.join(PROGRAMS)} or all")
    try:
        settings = _settings(args)
        load_profile(settings.profile)
        inputs = None
        if args.inputs is not None:
            inputs = load_inputs(args.inputs)
            B, T, H, K = inputs.q.shape if inputs.q.dim() == 4 else (0, 0, 0, 0)
            settings = Settings(**{**settings.__dict__, "batch": B, "heads": H, "tokens": T, "d_k": K,
                                   "d_v": inputs.v.shape[-1]})
        inputs = inputs or make_settings_inputs(settings)
        results = []
        ref = None
        with _progress(enabled=not args.json, total=len(versions) * math.ceil(settings.T / settings.chunk_size)) as tick:
            for v in versions:
                r = evaluate(v, settings, inputs, ref, progress=tick)
                ref = ref or reference(r.execution)
                results.append(r)
    except (KdaInputError, NpuSimError, ValueError) as err:
        return _fail(str(err))
    if args.json:
        payload = [r.to_json() for r in results]
        print(json.dumps(payload if len(payload) > 1 else payload[0], indent=2, ensure_ascii=False,
                         default=_json_default))
    else:
        from .render import print_results
        print_results(results)
    if args.strict and any(not r.passed or r.execution.nonfinite for r in results):
        return 1
    return 0


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    raise TypeError(type(x).__name__)


class _progress:
    """A progress bar on stderr for long runs; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool, total: int):
        self.enabled = enabled and sys.stderr.isatty() and total >= 64
        self.total = total
        self.done = 0

    def __enter__(self):
        if not self.enabled:
            return lambda done, total: None
        from rich.progress import Progress
        self.bar = Progress(transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("chunks", total=self.total)
        return self.tick

    def tick(self, done: int, total: int) -> None:
        self.bar.advance(self.task, 1)

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)
        return False


if __name__ == "__main__":
    sys.exit(main())
