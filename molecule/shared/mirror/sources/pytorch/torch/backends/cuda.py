"""Fixture torch.backends.cuda: whether the build has flash attention (on ROCm, AOTriton's kernels)."""

import os

from torch import version


def is_flash_attention_available():
    """As upstream: True when the build compiled flash attention in; here its AOTriton library is in torch/lib."""
    library = os.path.join(os.path.dirname(os.path.dirname(__file__)), "lib", "libaotriton_v2.so")
    return bool(version.aotriton) and os.path.exists(library)
