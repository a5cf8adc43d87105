"""Fixture amdsmi: the names vLLM's platform detection calls, answering for the simulated GPUs.

The real package drives libamd_smi.so through the amdgpu driver. This one answers for the GPU agents
of the rocminfo capture that the fixture ROCm packages simulate (_simulated.py, written when the mirror
is built). As in the real library, asking for handles before amdsmi_init() is an error.
"""

from ._simulated import GPUS

__version__ = "26.0.0+fixture"


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, status):
        super().__init__("AMDSMI_STATUS_%s" % status)
        self.err_code = status


class AmdSmiInitFlags:
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1


_initialized = False


def amdsmi_init(flag=AmdSmiInitFlags.INIT_AMD_GPUS):
    global _initialized
    _initialized = True


def amdsmi_shut_down():
    global _initialized
    if not _initialized:
        raise AmdSmiLibraryException("NOT_INIT")
    _initialized = False


def amdsmi_get_processor_handles():
    if not _initialized:
        raise AmdSmiLibraryException("NOT_INIT")
    return ["processor-%d" % index for index in range(len(GPUS))]


def amdsmi_get_gpu_asic_info(handle):
    if not _initialized:
        raise AmdSmiLibraryException("NOT_INIT")
    gpu = GPUS[int(handle.rsplit("-", 1)[1])]
    return {"market_name": gpu["market_name"], "device_id": gpu["device_id"], "target_graphics_version": gpu["gfx"]}
