"""Measured kernels as the simulator models them (for kda.validate and npusim.calibrate).

    registry.py   kernel names and shapes -> designs -> predicted latency (`resolve`)
    gdn.py        gdn_fla: FLA's Gated DeltaNet forward decomposition
"""
from kda.kernels.registry import KERNELS, KernelShape, kernel_names, resolve

__all__ = ["KERNELS", "KernelShape", "kernel_names", "resolve"]
