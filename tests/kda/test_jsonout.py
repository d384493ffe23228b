"""JSON that other parsers read: non-finite numbers become null wherever they sit."""
import json
import math

from kda.cli.jsonout import dumps, finite


def test_non_finite_numbers_become_null_at_any_depth():
    x = {"floor": math.inf, "runs": [1.5, (math.nan, 2)], "name": "v6", "n": 3}
    assert finite(x) == {"floor": None, "runs": [1.5, [None, 2]], "name": "v6", "n": 3}
    assert json.loads(dumps(x)) == {"floor": None, "runs": [1.5, [None, 2]], "name": "v6", "n": 3}
    assert "Infinity" not in dumps(x) and "NaN" not in dumps(x)
