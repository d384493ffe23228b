"""Measured kernels as the simulator models them (for kda.validate and npusim.calibrate).

    registry.py   kernel names and shapes -> designs -> predicted latency (`resolve`)
    gdn.py        gdn_fla: FLA's Gated DeltaNet forward decomposition
    pto.py        gdn_pto, gdn_pto_fused: MegaGDN-PTO's kernels as they run
    triton.py     gdn_triton64/128: vllm-ascend's Triton GDN kernels as their programs loop
    recording.py  recording a measured kernel's stages on one chunk
"""
from kda.kernels.registry import KERNELS, KernelShape, kernel_names, resolve

__all__ = ["KERNELS", "KernelShape", "kernel_names", "resolve"]
