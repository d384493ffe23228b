"""JSON that is JSON: a number that is not finite (inf, NaN: a roofline with no floor, a diverged run)
becomes null, never the `Infinity` or `NaN` that Python writes and other parsers refuse."""
from __future__ import annotations

import json
import math


def finite(x):
    """`x` with every non-finite float replaced by None (dicts, lists and tuples walked)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def dumps(x, **kwargs) -> str:
    """json.dumps of `finite(x)`, refusing (ValueError) anything non-finite that slipped through."""
    return json.dumps(finite(x), allow_nan=False, **kwargs)
