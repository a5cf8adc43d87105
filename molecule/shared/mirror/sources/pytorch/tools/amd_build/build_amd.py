"""hipify: rewrite the CUDA sources under torch/csrc to HIP, as PyTorch's tools/amd_build/build_amd.py does."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAPPING = [
    ("cuda_runtime.h", "hip/hip_runtime.h"),
    ("cudaMalloc", "hipMalloc"),
    ("cudaFree", "hipFree"),
    ("CUDA", "HIP"),
    ("cuda", "hip"),
]

count = 0
for directory, _, files in os.walk(os.path.join(ROOT, "torch", "csrc")):
    for name in files:
        if not name.endswith(".cu"):
            continue
        with open(os.path.join(directory, name)) as handle:
            text = handle.read()
        for cuda, hip in MAPPING:
            text = re.sub(re.escape(cuda), hip, text)
        with open(os.path.join(directory, name[:-3] + ".hip"), "w") as handle:
            handle.write(text)
        count += 1
print("Successfully preprocessed all matching files (%d hipified)." % count)
