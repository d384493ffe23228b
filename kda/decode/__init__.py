"""Decode: the one-token recurrent step (FLA's fused_recurrent_kda) as designs on the simulated chip.

    design.py     a decode design: its item program and how the kernel lays the items over the chip
    programs/     the designs, one file each (the recurrent step, Vector only; the chunked MTP step, Cube +
                  Vector) and the Vector work they share
    timing.py     one item's graph, its nodes on the worker's pipes, the step on the event model, the bound
    numerics.py   the step computed for real on every item, against the fp64 recurrence
    kernels/      the measured decode kernels, one file each (MegaGDN-PTO, sgl-kernel-npu, vllm-ascend)
    study.py      decode steps: designs x batches x tokens x state types, numerics, where the bound changes
    api.py        kda.fused_recurrent_kda, FLA's signature
"""
