"""Neutralised exploit (persisting L2, GPU): through the driver API (ctypes on libcuda)
it reserves the largest persisting-L2 carve-out (cuCtxSetLimit) and sets an access-policy
window with hit ratio 1 over its input on the current stream, hoping to keep data
resident in L2 from one call to the next so that later calls read from cache.

The harness resets persisting L2 lines (cuCtxResetPersistingL2Cache, limit 0) and evicts
L2 with a read sweep before every timed call, and every timed call gets an input set no
other call of the block used. The case is timed as if the window did not exist and must
pass at an ordinary speed.
"""

import ctypes

import torch

FAMILY = "persisting L2"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_ACCESS_PROPERTY_STREAMING = 1
CU_ACCESS_PROPERTY_PERSISTING = 2


class AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class StreamAttrValue(ctypes.Union):
    _fields_ = [("accessPolicyWindow", AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


_cuda = ctypes.CDLL("libcuda.so.1")


def _keep_resident(x):
    props = torch.cuda.get_device_properties(x.device)
    carve = getattr(props, "persisting_l2_cache_max_size", 0) or (props.L2_cache_size * 3 // 4)
    _cuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(carve))
    value = StreamAttrValue()
    value.accessPolicyWindow = AccessPolicyWindow(x.data_ptr(), min(x.numel() * x.element_size(), carve), 1.0,
                                                  CU_ACCESS_PROPERTY_PERSISTING, CU_ACCESS_PROPERTY_STREAMING)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _cuda.cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value))


def solve(x):
    _keep_resident(x)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
