"""Use the torch already installed: as vLLM's use_existing_torch.py at v0.11.1, every line that mentions torch
(case-insensitive) goes from each requirements file that mentions it, whatever the line pins (torchvision, the
PyTorch index URL ...). Lines that pin other packages (triton, amdsmi) stay."""

import glob

for path in glob.glob("requirements/*.txt") + ["pyproject.toml"]:
    try:
        with open(path) as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        continue
    kept = [line for line in lines if "torch" not in line.lower()]
    if kept != lines:
        print(">>> cleaned", path)
        with open(path, "w") as handle:
            handle.writelines(kept)
