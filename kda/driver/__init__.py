"""The numerics driver: a design's phase programs run over a whole batch, chunk by chunk, on torch.

    chunk_kda.py     kda.chunk_kda: fla-core's whole signature, the public entry; recurrent_kda (the ground truth)
    fla_options.py   FLA's in-kernel options as exact formulas, and the checks of chunk_kda's parameters
    autograd.py      forward_kda, differentiable_kda: the forward on the NPU under autograd, the backward
                     design behind it
    execute.py       execute: a design over a batch (one pass or several, variable lengths); record_graphs
                     (a timing-only run's graphs)
    chunks.py        the sequence cut into the programs' chunks, the last one zero-padded
    multipass.py     the passes of a design, one after the other, every tensor between them kept
    backward.py      execute_backward: a backward design's passes, every gradient
    checks.py        the checks of the inputs (KdaInputError), the inf/NaN warning
    inputs.py        seeded inputs (gate families)
    device.py        the torch device of the numerics
"""
