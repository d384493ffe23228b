"""Numerics on any torch device: every tensor the driver, the references, the precision rounding and the
programs make follows the inputs' device; `--device` on the CLI.

Without a GPU, device propagation is tested by making every factory call that names no device land on
the `meta` device (`with torch.device("meta")`): a tensor made without `device=` then meets the CPU
inputs and fails, or comes back on `meta`, just as it would meet CUDA inputs."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

import kda
from kda.driver.checks import KdaInputError
from kda.driver.execute import ChunkLoop, Types, execute
from kda.driver.device import DeviceError, resolve_device
from kda.settings import Settings
from kda.studies.evaluate import evaluate
from kda.studies.oracle import reference
from kda.driver.inputs import make_inputs
from kda.cli.run import main

HAS_CUDA = torch.cuda.is_available()


def _inputs(**kw):
    args = dict(batch=2, tokens=150, heads=2, d_k=32, d_v=32, gates="slow", seed=1, initial_state=True)
    args.update(kw)
    return make_inputs(**args)


@pytest.mark.parametrize("version", ["v3", "v4"])
@pytest.mark.parametrize("fast", [True, False])
def test_nothing_is_made_on_the_default_device(version, fast):
    x = _inputs()
    want = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, version=version, types=Types(transfer="bf16"), loop=ChunkLoop(fast=fast))
    with torch.device("meta"):
        got = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, version=version, types=Types(transfer="bf16"), loop=ChunkLoop(fast=fast))
        stored = got.inputs_as_stored
        ref = reference(got)
    assert got.o.device.type == "cpu" and got.final_state.device.type == "cpu"
    assert torch.equal(got.o, want.o) and torch.equal(got.final_state, want.final_state)
    assert all(t.device.type == "cpu" for t in stored)
    assert ref.o.device.type == "cpu" and ref.state.device.type == "cpu"


def test_the_api_and_the_references_make_nothing_on_the_default_device():
    x = _inputs(initial_state=False)
    with torch.device("meta"):
        o, S = kda.chunk_kda(x.q, x.k, x.v, x.g, x.beta, output_final_state=True)
        o_r, S_r = kda.recurrent_kda(x.q, x.k, x.v, x.g, x.beta, output_final_state=True)
        from kda.reference.recurrence import doc_chunk_kda
        o_d, _ = doc_chunk_kda(x.q[:, :128], x.k[:, :128], x.v[:, :128], x.g[:, :128], x.beta[:, :128])
        stored = execute(x.q, x.k, x.v, x.g, x.beta).inputs_as_stored     # h0 = zeros on the inputs' device
    assert {t.device.type for t in (o, S, o_r, S_r, o_d, *stored)} == {"cpu"}


def test_inputs_on_two_devices_are_one_line():
    """The only other device on a CPU machine is meta, which the input checks refuse first (no data); on a
    GPU machine the device mismatch itself is the line (tests/kda/test_gpu_oracle.py runs there)."""
    x = _inputs()
    with pytest.raises(KdaInputError, match="k must be a dense tensor with data, got a torch.strided tensor on meta"):
        execute(x.q, x.k.to("meta"), x.v, x.g, x.beta)


def test_devices_torch_cannot_use_are_refused():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(DeviceError, match="choose from cpu, cuda, npu"):
        resolve_device("tpu")
    if not HAS_CUDA:
        with pytest.raises(DeviceError, match="torch cannot use CUDA here"):
            resolve_device("cuda")
    if importlib.util.find_spec("torch_npu") is None:
        with pytest.raises(DeviceError, match="torch_npu is not installed"):
            resolve_device("npu")


@pytest.mark.parametrize("device,why", [("tpu", "choose from cpu, cuda, npu"),
                                        ("cuda", "torch cannot use CUDA here"),
                                        ("npu", "torch_npu is not installed")])
def test_cli_refuses_an_unusable_device_in_one_line(device, why, capsys):
    if device == "cuda" and HAS_CUDA:
        pytest.skip("CUDA is usable here")
    if device == "npu" and importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    assert main(["--device", device, "--chunks", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why in err and "Traceback" not in err


def test_cli_on_cpu_is_the_default(capsys):
    assert main(["--device", "cpu", "--chunks", "2", "--heads", "2", "--json"]) == 0
    cpu = json.loads(capsys.readouterr().out)
    assert main(["--chunks", "2", "--heads", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["errors"] == cpu["errors"]


# ---- on a GPU (skipped without CUDA) ----

def cuda(test):
    return pytest.mark.cuda(pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")(test))


@cuda
@pytest.mark.parametrize("version", ["v3", "v4", "fla", "v5"])
def test_cuda_numerics_follow_the_inputs_and_match_the_cpu(version):
    x = _inputs(tokens=300)
    cpu = execute(x.q, x.k, x.v, x.g, x.beta, None, x.initial_state, version=version, types=Types(transfer="fp32"))
    dev = [t.cuda() for t in (x.q, x.k, x.v, x.g, x.beta, x.initial_state)]
    runs = {}
    for mode, kw in (("runtime", dict(fast=False)), ("eager", dict(graphs=False)), ("graph", dict(graphs=True))):
        gpu = runs[mode] = execute(*dev[:5], None, dev[5], version=version, types=Types(transfer="fp32"), loop=ChunkLoop(**kw))
        assert gpu.o.device.type == "cuda" and gpu.final_state.device.type == "cuda"
        assert gpu.replay == {"runtime": "recording runtime", "eager": "eager", "graph": "cuda-graph"}[mode]
        torch.testing.assert_close(gpu.o.cpu(), cpu.o, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(gpu.final_state.cpu(), cpu.final_state, rtol=1e-4, atol=1e-5)
    # on the GPU too, the three ways of running the chunks compute the same bits (the same kernels on the
    # same layouts: the chunks are contiguous on every path)
    for mode in ("eager", "graph"):
        assert torch.equal(runs[mode].o, runs["runtime"].o), mode
        assert torch.equal(runs[mode].final_state, runs["runtime"].final_state), mode


@cuda
def test_cuda_evaluate_and_the_watch():
    r = evaluate("v3", Settings(chunks=3, heads=2, d_k=32, d_v=32, device="cuda"), timing=False)
    assert r.passed and r.execution.o.device.type == "cuda"
    from tests.kda.test_fast_numerics import _late_overflow
    q, k, v, g, beta = (t.cuda() for t in _late_overflow())
    nf = execute(q, k, v, g, beta, types=Types(transfer="fp16")).nonfinite
    assert (nf.chunk, nf.where, nf.tensor, nf.sequence) == (2, "sync ① (fp16)", "K_div", 1)
