"""python -m kda.run's options checked after parsing, in one place: each value alone, then the options that
contradict each other. One line naming the options (KdaInputError) for anything wrong."""
from __future__ import annotations

import argparse

from kda.api import KdaInputError


def given(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The options (by dest) that `argv` names, whatever their defaults."""
    unset = object()
    parser.set_defaults(**{a.dest: None if isinstance(a, argparse._AppendAction) else unset
                           for a in parser._actions if a.dest != "help"})
    return {k for k, v in vars(parser.parse_args(argv)).items() if v is not unset and v is not None}


# --inputs brings q, k, v, g, beta and their shapes: the options that would make other ones
_FROM_INPUTS = ("batch", "tokens", "chunks", "heads", "dk", "dv", "gates", "initial_state")


def check_args(args) -> None:
    """Every bound and every conflict; `args.given` (the options the command line named) when known."""
    checks = {"--chunks": args.chunks, "--heads": args.heads, "--batch": args.batch,
              "--chunk-size": args.chunk_size, "--dk": args.dk, "--dv": args.dv, "--interleave": args.interleave}
    checks.update({f"--{k}": getattr(args, k) for k in ("tokens", "cores") if getattr(args, k) is not None})
    for flag, value in checks.items():
        if value < 1:
            raise KdaInputError(f"{flag} must be >= 1, got {value}")
    if args.uncertainty is not None and args.uncertainty < 2:
        raise KdaInputError(f"--uncertainty needs at least 2 samples, got {args.uncertainty}")
    if args.no_numerics and args.inputs is not None:
        raise KdaInputError("--no-numerics replays timing only: it takes no --inputs")
    if args.no_numerics and args.attribution:
        raise KdaInputError("--attribution reruns the numerics: it does not go with --no-numerics")
    named = getattr(args, "given", None)
    if named is None:
        named = {k for k in ("tokens", "seqlens", "inputs") if getattr(args, k) is not None}
    both = lambda a, b: a in named and b in named
    if both("tokens", "chunks"):
        raise KdaInputError("--tokens gives each sequence's length: it replaces --chunks (give one of them)")
    if "seqlens" in named and (args.batch != 1 or args.tokens is not None or "chunks" in named):
        raise KdaInputError("--seqlens gives every sequence's length: it replaces --batch, --tokens and --chunks")
    clash = [k for k in _FROM_INPUTS if both("inputs", k)]
    if clash:
        raise KdaInputError(f"--inputs sets the shapes and values of q, k, v, g and beta: it does not go with "
                            f"--{clash[0].replace('_', '-')}")
    if "states" in named and not args.backward:
        raise KdaInputError("--states chooses how the backward pass gets the forward's intermediates: "
                            "it needs --backward")
