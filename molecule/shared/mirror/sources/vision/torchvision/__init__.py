"""Fixture torchvision: refuses a torch other than the one it was built against, as the real one does."""

import torch

from torchvision import version  # noqa: F401 - written by setup.py

__version__ = version.__version__

if torch.__version__ != version.torch:
    # A torchvision from another torch build (PyPI's CUDA one beside a ROCm torch): its operators do not load.
    raise RuntimeError(
        "operator torchvision::nms does not exist (torchvision %s was built for torch %s, not %s)"
        % (__version__, version.torch, torch.__version__)
    )

# The operators register with torch's dispatcher when the library loads: CPU always, CUDA (HIP on ROCm) only when
# the build compiled them (FORCE_CUDA=1 on a build host without a GPU).
torch._fixture_register_kernel("torchvision::nms", "CPU")
if version.hip is not None:
    torch._fixture_register_kernel("torchvision::nms", "CUDA")
