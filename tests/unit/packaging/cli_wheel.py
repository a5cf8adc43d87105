"""Build the instinct-stack CLI's wheel from a copy of its sources, as `python -m build` does for a release."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def build_cli_wheel(work):
    """The wheel built into WORK; setuptools runs on a copy, so it leaves nothing in the checkout.

    --no-isolation: the build backend (setuptools) from this virtualenv, nothing downloaded.
    """
    source = work / "source"
    shutil.copytree(ROOT / "src" / "instinct_stack", source / "src" / "instinct_stack")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(work), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = work.glob("instinct_stack-*.whl")
    return wheel
