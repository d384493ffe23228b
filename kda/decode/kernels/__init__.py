"""The measured decode kernels as designs, one file each, read from the source at the commit that was timed.

    kdn_decode.py          MegaGDN-PTO pull request 35's kdn_decode
    kdn_decode_pr34.py     MegaGDN-PTO pull request 34's kernel
    sgl_kda_decode.py      sgl-kernel-npu pull request 635's PTO KDA decode
    gdn_decode_ascendc.py  vllm-ascend pull request 12869's AscendC GDN decode
"""
from kda.decode.kernels.gdn_decode_ascendc import GDN_DECODE_ASCENDC
from kda.decode.kernels.kdn_decode import KDN_DECODE
from kda.decode.kernels.kdn_decode_pr34 import KDN_DECODE_PR34
from kda.decode.kernels.sgl_kda_decode import SGL_KDA_DECODE

MEASURED = {d.name: d for d in (KDN_DECODE, KDN_DECODE_PR34, SGL_KDA_DECODE, GDN_DECODE_ASCENDC)}
