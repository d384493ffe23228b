"""Measured kernels as the simulator models them (for kda.validate and npusim.calibrate).

    registry.py   kernel names and shapes -> designs -> predicted latency (`resolve`)
    gdn.py        gdn_fla: FLA's Gated DeltaNet forward decomposition
    pto.py        MegaGDN-PTO's six stages and fused kernel, as their AscendC kernels run
    triton.py     vllm-ascend's Triton GDN stages, as their programs run
    fla_npu.py    flash-linear-attention-npu's AscendC KDA forward, its four stages as they run
    fla_npu_solve.py          its Prepare's solve: the solve's inputs, (I + L)^-1 by diagonal blocks, the merges
    fla_npu_ops.py            the helper functions its stages share (clamps, LoadAsFloatRow, row pairs, ...)
    fla_npu_intra.py          flash-linear-attention-npu's ChunkKdaFwdIntraSubChunk (KDA, AscendC), shipped
    fla_npu_intra_history.py  its earlier builds, each from the source at its commit
    recording.py  graphs of a design recorded for one kernel shape
    decode.py     the measured decode kernels (kda/decode/kernels/): decode shapes, predicted step latency
"""
from kda.kernels.registry import KERNELS, KernelShape, kernel_names, resolve

__all__ = ["KERNELS", "KernelShape", "kernel_names", "resolve"]
