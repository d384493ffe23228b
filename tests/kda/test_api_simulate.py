"""kda.api.simulate: the simulated report of one chunk_kda call, from the call's own tensors."""
import pytest

from kda.api.simulate import Simulated, simulate
from kda.driver.checks import KdaInputError
from kda.driver.inputs import make_inputs


def _inputs():
    x = make_inputs(tokens=128, heads=2, d_k=64, d_v=64)
    return x.q, x.k, x.v, x.g, x.beta


def test_the_report_is_the_call_s_shape_on_the_chip():
    sim = simulate(*_inputs(), version="v6")
    assert isinstance(sim, Simulated)
    assert sim.bound_us <= sim.latency_us <= sim.serial_us + 1e-9      # a bound below, the serial replay above
    assert sim.syncs_per_chunk >= 1 and len(sim.passes) >= 1
    assert (sim.json["heads"], sim.json["chunks"], sim.json["d_k"]) == (2, 2, 64)     # T = 128 at chunk 64
    assert sim.to_json() == sim.json and sim.to_json() is not sim.json                 # a copy


def test_inputs_it_cannot_take_are_refused_in_one_line():
    q, k, v, g, beta = _inputs()
    for args, says in (((q, k[:, :64], v, g, beta), "k must have shape"), ((q, k, v, g[..., :3], beta), "g must have"),
                       ((q, k, v, g, beta[:, :, :1]), "beta must have shape")):
        with pytest.raises(KdaInputError, match=says) as err:
            simulate(*args)
        assert "\n" not in str(err.value)
