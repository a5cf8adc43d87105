"""torch.cuda on ROCm: the HIP devices, visible through /dev/kfd."""

import os


def is_available():
    return os.path.exists("/dev/kfd") and os.access("/dev/kfd", os.R_OK | os.W_OK)
