"""Measured kernels as the simulator models them (for kda.validate and npusim.calibrate).

    registry.py   kernel names and shapes -> designs -> predicted latency (`resolve`)
    gdn.py        gdn_fla: FLA's Gated DeltaNet forward decomposition
    pto.py        MegaGDN-PTO's six stages and fused kernel, as their AscendC kernels run
    triton.py     vllm-ascend's Triton GDN stages, as their programs run
    recording.py  graphs of a design recorded for one kernel shape
    decode.py     the measured decode kernels: names, decode shapes, predicted step latency
    kdn_decode.py, kdn_decode_pr34.py   MegaGDN-PTO's KDA decode kernels (pull requests 35 and 34)
    sgl_kda_decode.py                   sgl-kernel-npu's PTO KDA decode (pull request 635)
    gdn_decode_ascendc.py               vllm-ascend's AscendC GDN decode (pull request 12869)
"""
from kda.kernels.registry import KERNELS, KernelShape, kernel_names, resolve

__all__ = ["KERNELS", "KernelShape", "kernel_names", "resolve"]
