"""The GPU oracle: every design against FLA's Triton `chunk_kda` (fla-core) on the Kimi Linear layer shape
(32 heads of 128, 131072 tokens; KDA_ORACLE_TOKENS overrides), in bf16, held to FLA's tolerance
(kda/reference/parity.py: rel RMS < 0.005 on the output and the final state).

Marked `cuda`: skipped where CUDA or fla-core is absent, so CI (CPU only) skips it. On a GPU machine:
`bash benchmarks/gpu.sh` (installs what it needs, runs this and benchmarks/devices.py)."""
from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.cuda

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
try:
    from fla.ops.kda import chunk_kda as fla_chunk_kda
except ImportError as err:                      # fla-core absent, or its Triton cannot load
    pytest.skip(f"fla-core is not importable ({err})", allow_module_level=True)

import kda  # noqa: E402
from kda import programs  # noqa: E402
from kda.reference.parity import RATIO, compare  # noqa: E402

TOKENS = int(os.environ.get("KDA_ORACLE_TOKENS", 131072))
HEADS, D = 32, 128
DESIGNS = list(getattr(programs, "DESIGNS", programs.PROGRAMS))


def _layer(gates: str, seed: int = 0):
    """Kimi Linear's KDA shape in bf16 (q, k L2-normalised as the model does; beta in bf16 as FLA's tests
    make it), the log decay in fp32. Made on the GPU head by head: no full-size fp32 temporaries."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    shape = (1, TOKENS, HEADS)
    q, k, v = (torch.empty(*shape, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    g = torch.empty(*shape, D, device="cuda")
    for h in range(HEADS):
        rnd = lambda: torch.randn(1, TOKENS, D, generator=gen, device="cuda")
        q[:, :, h] = F.normalize(rnd(), dim=-1)
        k[:, :, h] = F.normalize(rnd(), dim=-1)
        v[:, :, h] = rnd()
        g[:, :, h] = F.logsigmoid(rnd()) if gates == "seed" else -5.0 * torch.sigmoid(rnd())
    beta = torch.sigmoid(torch.randn(*shape, generator=gen, device="cuda")).to(torch.bfloat16)
    return q, k, v, g, beta


@pytest.fixture(scope="module", params=["seed", "kimi"])
def oracle(request):
    """(gates, inputs, FLA's output and final state)."""
    x = _layer(request.param)
    o, S = fla_chunk_kda(q=x[0], k=x[1], v=x[2], g=x[3], beta=x[4], output_final_state=True)
    torch.cuda.synchronize()
    return request.param, x, o, S


@pytest.mark.parametrize("version", DESIGNS)
def test_every_design_matches_flas_triton_chunk_kda(oracle, version):
    gates, x, o_fla, S_fla = oracle
    if gates == "kimi" and version in ("v1", "v2", "v3"):
        pytest.skip("exp(-gc) overflows under FLA's -5*sigmoid gates: the document's form (README, v4)")
    o, S = kda.chunk_kda(*x, output_final_state=True, version=version)
    assert o.device.type == "cuda" and o.dtype == torch.bfloat16
    p_o, p_s = compare(o_fla.float(), o.float()), compare(S_fla.float(), S)
    assert p_o.passed and p_s.passed, (f"{version} vs FLA chunk_kda, {gates} gates, {TOKENS} tokens: output rel "
                                       f"RMS {p_o.rel_rms_err:.3e}, state {p_s.rel_rms_err:.3e} (limit {RATIO})")
