"""The torch device the numerics run on: `cpu` (default), `cuda` or `npu` (Ascend, through torch_npu, an
optional extra: `pip install -e ".[npu]"`, imported only when asked for). The phase programs are plain torch
code, so they run wherever torch does; every tensor the driver makes follows the inputs' device."""
from __future__ import annotations

import torch

DEVICES = ("cpu", "cuda", "npu")


class DeviceError(ValueError):
    """A device torch cannot use here; the message is one line saying why."""


def resolve_device(name: str | torch.device) -> torch.device:
    """The torch.device for `name` ("cpu", "cuda", "cuda:1", "npu", ...), or DeviceError saying why torch
    cannot use it here."""
    text = str(name)
    kind = text.split(":")[0]
    if kind not in DEVICES:
        raise DeviceError(f"--device {text}: choose from {', '.join(DEVICES)} (optionally with :INDEX)")
    if kind == "npu":
        try:
            import torch_npu  # noqa: F401  registers the "npu" device with torch
        except ImportError:
            raise DeviceError(f"--device {text}: torch_npu is not installed "
                              f"(pip install -e \".[npu]\" on a machine with CANN)") from None
    try:
        device = torch.device(text)
    except (RuntimeError, TypeError) as err:
        raise DeviceError(f"--device {text}: not a torch device ({str(err).splitlines()[0]})") from None
    if kind == "cpu" and device.index not in (None, 0):
        raise DeviceError(f"--device {text}: torch has one CPU device (cpu, or cpu:0); the numerics use its cores")
    if kind == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch was built without CUDA" if torch.version.cuda is None
                   else "no CUDA GPU is visible")
            raise DeviceError(f"--device {text}: torch cannot use CUDA here ({why}; torch {torch.__version__})")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"--device {text}: only {torch.cuda.device_count()} CUDA device(s)")
    if kind == "npu" and not torch.npu.is_available():
        raise DeviceError(f"--device {text}: torch_npu finds no Ascend NPU")
    return device


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (for timings)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "npu":
        torch.npu.synchronize(device)
