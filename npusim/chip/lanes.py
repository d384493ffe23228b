"""Many profiles at once: one Profile whose sampled fields hold arrays over the samples ("lanes").

The cost model (cost.py, isa.py, pipes.py, template.py) then computes every duration for all samples in one
pass, with the same floating-point operations per sample as on a plain Profile (numpy's elementwise +, -, *, /
round as Python's floats do). Where the model branches on a value (a comparison, `max`), the branch is taken
for all lanes when they agree; where they disagree, `Diverges` says which lanes go which way, and the caller
splits the samples and builds again (stacked_templates in npusim/model/whatif/timer.py). `larger` is `max` taken
lane by lane, for the places where the larger of two durations is a value, not a branch.

What cannot be computed lane by lane (a sampled field turned into an int, a count, a float()) raises
TypeError: the caller then times those samples one profile at a time.
"""
from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from npusim.chip.profile import Profile

SECTIONS = ("chip", "cube", "vector", "sync", "memory", "workspace", "core", "isa", "host")


class Diverges(Exception):
    """The lanes take different branches: `mask` is True where the condition holds."""

    def __init__(self, mask: np.ndarray):
        super().__init__(f"{int(mask.sum())} of {mask.size} samples take the other branch")
        self.mask = mask


class Lanes(np.ndarray):
    """A float64 array over samples; its truth value is the lanes' common one, or Diverges."""

    def __bool__(self) -> bool:
        a = self.view(np.ndarray)
        if a.all():
            return True
        if not a.any():
            return False
        raise Diverges(a.astype(bool))

    def __float__(self):
        raise TypeError("a sampled field cannot be read as one number")

    def __int__(self):
        raise TypeError("a sampled field cannot be read as one number")

    def __index__(self):
        raise TypeError("a sampled field cannot be read as one number")


def larger(*xs):
    """The largest of `xs`, lane by lane where any is a Lanes array (`max` otherwise)."""
    if not any(isinstance(x, np.ndarray) for x in xs):
        return max(xs)
    out = xs[0]
    for x in xs[1:]:
        out = np.maximum(out, x)
    return out


def stack(profiles: list[Profile]) -> Profile:
    """The first profile with every field that differs among `profiles` held as a Lanes array over them."""
    base = profiles[0]
    sections = {}
    for name in SECTIONS:
        part = getattr(base, name)
        changed = {}
        for f in fields(part):
            values = [getattr(getattr(p, name), f.name) for p in profiles]
            if any(v != values[0] for v in values):
                changed[f.name] = np.asarray(values, dtype=float).view(Lanes)
        if changed:
            sections[name] = replace(part, **changed)
    return replace(base, **sections)


def take(profile: Profile, index) -> Profile:
    """The lanes `index` (an index array or a boolean mask) of a stacked profile."""
    sections = {}
    for name in SECTIONS:
        part = getattr(profile, name)
        changed = {f.name: getattr(part, f.name)[index] for f in fields(part)
                   if isinstance(getattr(part, f.name), Lanes)}
        if changed:
            sections[name] = replace(part, **changed)
    return replace(profile, **sections)


def lanes_of(x, n: int) -> np.ndarray:
    """`x` (a number or a Lanes array) as a plain float64 array of `n` lanes."""
    return np.broadcast_to(np.asarray(x, dtype=float).view(np.ndarray), (n,))
