"""The ground truth every design is held to.

    recurrence.py      the KDA recurrence in fp64 (FLA's layout and conventions)
    recurrence_bwd.py  its gradients through autograd
    parity.py          one tolerance rule: FLA's assert_close metric
"""
