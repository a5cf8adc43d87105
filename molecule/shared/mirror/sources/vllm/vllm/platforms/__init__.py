"""Platform detection as vLLM does it (vllm/platforms/__init__.py at v0.11.0 and v0.11.1): ROCm only through amdsmi.

rocm_platform_plugin() imports amdsmi, initialises it and asks for processor handles; any failure,
an ImportError included, means "not ROCm", logged at debug level only. With no platform found,
current_platform is an UnspecifiedPlatform and `vllm serve` fails with "Failed to infer device type".
A ROCm torch alone does not make the platform ROCm.
"""

import logging
import os

logger = logging.getLogger("vllm.platforms")


class Platform:
    device_name = ""
    device_type = ""
    ray_device_key = ""

    def is_rocm(self):
        return self.device_name == "rocm"


class UnspecifiedPlatform(Platform):
    pass


class RocmPlatform(Platform):
    device_name = "rocm"
    device_type = "cuda"  # vLLM's ROCm platform runs on torch.cuda (HIP)
    ray_device_key = "GPU"  # the Ray resource of its devices (vllm/platforms/rocm.py)

    def __init__(self):
        # vllm/platforms/rocm.py copies HIP_VISIBLE_DEVICES into CUDA_VISIBLE_DEVICES.
        if "HIP_VISIBLE_DEVICES" in os.environ:
            os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["HIP_VISIBLE_DEVICES"]


def rocm_platform_plugin():
    is_rocm = False
    logger.debug("Checking if ROCm platform is available.")
    try:
        import amdsmi

        amdsmi.amdsmi_init()
        try:
            if len(amdsmi.amdsmi_get_processor_handles()) > 0:
                is_rocm = True
                logger.debug("Confirmed ROCm platform is available.")
            else:
                logger.debug("ROCm platform is not available because no GPU is found.")
        finally:
            amdsmi.amdsmi_shut_down()
    except Exception as error:
        logger.debug("ROCm platform is not available because: %s", str(error))
    return "rocm" if is_rocm else None


def resolve_current_platform():
    if rocm_platform_plugin():
        logger.info("Automatically detected platform rocm.")
        return RocmPlatform()
    logger.debug("No platform detected, vLLM is running on UnspecifiedPlatform")
    return UnspecifiedPlatform()


current_platform = resolve_current_platform()
