"""python -m kda.run's options checked after parsing, in one place: the options that contradict each other
(each dimension's bounds are Settings'); and the option values that need parsing (--seqlens, --set,
--precision, --inputs).
One line naming the option (KdaInputError) for anything wrong."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from npusim import NpuSimError

from kda.cli.common import seed_problem
from kda.driver.checks import KdaInputError, check_inputs, check_tensor
from kda.driver.inputs import KdaInputs


def given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The options (by dest) that `argv` names, whatever their defaults."""
    unset = object()
    parser.set_defaults(**{a.dest: None if isinstance(a, argparse._AppendAction) else unset
                           for a in parser._actions if a.dest != "help"})
    return {k for k, v in vars(parser.parse_args(argv)).items() if v is not unset and v is not None}


# --inputs brings q, k, v, g, beta and their shapes: the options that would make other ones
_FROM_INPUTS = ("batch", "tokens", "chunks", "heads", "dk", "dv", "gates", "initial_state")


def check_args(args) -> None:
    """Every conflict between options, and the bounds of those that make no setting; `args.given` (the options
    the command line named) when known. The bounds of the dimensions are Settings' (kda/settings)."""
    if args.value_heads is not None and (args.inputs is not None or args.backward):
        raise KdaInputError(f"--value-heads sets generated inputs and times the forward: it does not go with "
                            f"{'--inputs' if args.inputs is not None else '--backward'}")
    in_kernel = [f for f in ("qk_l2norm_in_kernel", "gate_in_kernel", "beta_sigmoid_in_kernel") if getattr(args, f, False)]
    if in_kernel and args.backward:
        raise KdaInputError(f"--{in_kernel[0].replace('_', '-')} times the forward's in-kernel work: it does not go "
                            f"with --backward")
    lb = getattr(args, "gate_lower_bound", None)
    if lb is not None and not getattr(args, "gate_in_kernel", False):
        raise KdaInputError("--gate-lower-bound bounds the in-kernel gate: it needs --gate-in-kernel")
    if lb is not None and not -5.0 <= lb < 0.0:      # also refuses nan and inf
        raise KdaInputError(f"--gate-lower-bound must be in [-5, 0) (FLA's safe gate), got {lb}")
    if problem := seed_problem(args.seed):
        raise KdaInputError(problem)
    if args.uncertainty is not None:
        from kda.studies.uncertainty import check_samples
        try:
            check_samples(args.uncertainty)
        except (ValueError, NpuSimError) as err:
            raise KdaInputError(str(err)) from None
    if args.no_numerics and args.inputs is not None:
        raise KdaInputError("--no-numerics replays timing only: it takes no --inputs")
    if args.no_numerics and args.attribution:
        raise KdaInputError("--attribution reruns the numerics: it does not go with --no-numerics")
    named = getattr(args, "given", None)
    if named is None:
        named = {k for k in ("tokens", "seqlens", "inputs") if getattr(args, k) is not None}

    def both(a: str, b: str) -> bool:
        return a in named and b in named

    if both("tokens", "chunks"):
        raise KdaInputError("--tokens gives each sequence's length: it replaces --chunks (give one of them)")
    if "seqlens" in named and (args.batch != 1 or args.tokens is not None or "chunks" in named):
        raise KdaInputError("--seqlens gives every sequence's length: it replaces --batch, --tokens and --chunks")
    clash = [k for k in _FROM_INPUTS if both("inputs", k)]
    if clash:
        raise KdaInputError(f"--inputs sets the shapes and values of q, k, v, g and beta: it does not go with "
                            f"--{clash[0].replace('_', '-')}")
    if "probe_chunks" in named and not args.no_numerics:
        raise KdaInputError("--probe-chunks checks a timing-only run: with numerics the run is its own check "
                            "(add --no-numerics)")
    if "states" in named and not args.backward:
        raise KdaInputError("--states chooses how the backward pass gets the forward's intermediates: "
                            "it needs --backward")


def parse_payload_dtypes(text: str | None) -> dict[str, str]:
    """'A_raw=fp32, M=fp32' -> {'A_raw': 'fp32', 'M': 'fp32'}; one line naming what is wrong otherwise."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, dtype = (x.strip() for x in item.partition("="))
        if not sep or not name or dtype not in ("fp32", "bf16", "fp16"):
            raise KdaInputError(f"--precision: {item.strip()!r} is not NAME=TYPE with TYPE fp32, bf16 or fp16")
        out[name] = dtype
    return out


def parse_seqlens(text: str) -> tuple[int, ...]:
    """'4096,131072' -> (4096, 131072); one line naming what is wrong otherwise."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise KdaInputError("--seqlens is empty: give each sequence's tokens, e.g. 4096,131072")
    out = []
    for x in items:
        try:
            n = int(x)
        except ValueError:
            raise KdaInputError(f"--seqlens: {x!r} is not a whole number of tokens") from None
        if n < 1:
            raise KdaInputError(f"--seqlens: every sequence needs at least one token, got {n}")
        out.append(n)
    return tuple(out)


def parse_overrides(items: list[str]) -> dict[str, float]:
    """['sync.latency_us=0.3'] -> {'sync.latency_us': 0.3}; one line naming what is wrong otherwise."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or key.count(".") != 1:
            raise KdaInputError(f"--set: {item!r} is not SECTION.FIELD=VALUE (e.g. sync.latency_us=0.3)")
        try:
            out[key] = float(value)
        except ValueError:
            raise KdaInputError(f"--set {key}: {value!r} is not a number") from None
        if not math.isfinite(out[key]) or out[key] < 0:
            raise KdaInputError(f"--set {key}: {value!r} must be a finite number >= 0")
    return out


def check_inputs_seqlens(inputs: KdaInputs, seqlens: tuple[int, ...], path: Path) -> None:
    """--inputs with --seqlens: FLA's variable-length layout, one row [1, total tokens, H, ...] that the
    lengths cut into sequences, each with its own initial state. One line before any version runs."""
    q, h0 = inputs.q, inputs.initial_state
    if q.dim() != 4 or q.shape[0] != 1:
        raise KdaInputError(f"--inputs {path} with --seqlens: q must be one row [1, total tokens, H, K] "
                            f"(FLA's cu_seqlens layout), got {list(q.shape)}")
    if sum(seqlens) != q.shape[1]:
        raise KdaInputError(f"--seqlens sums to {sum(seqlens)} tokens, but --inputs {path} holds {q.shape[1]}")
    if h0 is not None and (h0.dim() != 4 or h0.shape[0] != len(seqlens)):
        raise KdaInputError(f"--inputs {path}: initial_state must hold one state per sequence ({len(seqlens)} "
                            f"in --seqlens), got shape {list(h0.shape)}")


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
    wrong = [k for k, x in data.items() if x is not None and (not isinstance(x, torch.Tensor)
                                                              or x.layout != torch.strided)]
    if wrong:
        x = data[wrong[0]]
        raise KdaInputError(f"--inputs {path}: {wrong[0]} must be a dense tensor, got "
                            f"{type(x).__name__ if not isinstance(x, torch.Tensor) else x.layout}")
    missing = [k for k in ("q", "k", "v", "beta") if k not in data]
    if missing or ("g" not in data and "alpha" not in data):
        raise KdaInputError(f"--inputs {path}: missing {', '.join(missing) or 'g or alpha'}")
    try:                                 # the API's checks of each tensor, before any arithmetic on one
        for name, x in data.items():
            if name in ("q", "k", "v", "g", "alpha", "beta", "initial_state"):
                check_tensor(name, x, optional=name == "initial_state")
    except KdaInputError as err:
        raise KdaInputError(f"--inputs {path}: {err}") from None
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
    x = KdaInputs(data["q"], data["k"], data["v"], g, data["beta"], data.get("initial_state"))
    try:                                 # shapes and values as the API checks them
        check_inputs(x.q, x.k, x.v, x.g, x.beta, None, 1)   # the state per sequence: check_inputs_seqlens
    except KdaInputError as err:
        raise KdaInputError(f"--inputs {path}: {err}") from None
    return x
