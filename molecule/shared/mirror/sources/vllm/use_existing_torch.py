"""Drop the torch pins from the requirements so the build uses the torch already installed (as vLLM's script does)."""

import glob

for path in glob.glob("requirements/*.txt"):
    with open(path) as handle:
        lines = handle.readlines()
    kept = [line for line in lines if not line.strip().lower().startswith("torch")]
    if kept != lines:
        print(">>> cleaned", path)
        with open(path, "w") as handle:
            handle.writelines(kept)
