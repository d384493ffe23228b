"""The ground truth every design is held to.

    recurrence.py      the KDA recurrence in fp64 (FLA's layout and conventions)
    recurrence_bwd.py  its gradients through autograd
    parity.py          one tolerance rule: FLA's assert_close metric
    fla_oracle.py      fla-core's chunk_kda on its naive path: the oracle of kda.chunk_kda's FLA parameters
"""
