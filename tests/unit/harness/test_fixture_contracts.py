"""The fixtures demand what upstream demands: vLLM serves only on a platform amdsmi detects."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(ROOT, "molecule", "shared", "mirror", "sources")
sys.path.insert(0, os.path.join(ROOT, "molecule", "shared", "mirror"))
import build_mirror  # noqa: E402


def vllm(tmp_path, *args, amdsmi=None):
    """Runs the fixture's `vllm` CLI from its source, with the given amdsmi package importable (or none)."""
    path = [os.path.join(SOURCES, "vllm")]
    if amdsmi is not None:
        path.insert(0, str(amdsmi))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1", VLLM_LOGGING_LEVEL="DEBUG")
    return subprocess.run(
        [sys.executable, "-c", "from vllm.entrypoints.cli import main; main()", *args],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def fixture_amdsmi(tmp_path, gpus):
    """The amd-smi-lib package's amdsmi, as build_mirror lays it out, answering for gpus."""
    rocminfo = ""
    if gpus:
        with open(build_mirror.ROCMINFO_FIXTURE) as handle:
            rocminfo = handle.read()
    for path, content in build_mirror.amd_smi_files(str(tmp_path / "amd_smi"), rocminfo).items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content)
    return tmp_path / "amd_smi"


def test_without_amdsmi_vllm_serve_refuses_like_vllm(tmp_path):
    run = vllm(tmp_path, "serve", "model", "--port", "0", amdsmi=None)
    assert run.returncode != 0
    assert "Failed to infer device type" in run.stderr
    # vllm/platforms/__init__.py logs why at debug level: the import of amdsmi failed.
    assert "ROCm platform is not available because: No module named 'amdsmi'" in run.stderr


def test_amdsmi_without_gpus_is_no_platform_either(tmp_path):
    run = vllm(tmp_path, "serve", "model", amdsmi=fixture_amdsmi(tmp_path, gpus=False))
    assert run.returncode != 0 and "Failed to infer device type" in run.stderr
    assert "no GPU is found" in run.stderr


def test_amdsmi_answering_for_the_simulated_gpus_gives_rocm(tmp_path):
    amdsmi = fixture_amdsmi(tmp_path, gpus=True)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import amdsmi; amdsmi.amdsmi_init(); hs = amdsmi.amdsmi_get_processor_handles(); "
            "print(len(hs), amdsmi.amdsmi_get_gpu_asic_info(hs[0])['target_graphics_version']); "
            "from vllm.platforms import current_platform; print(current_platform.device_name)",
        ],
        env=dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(amdsmi), os.path.join(SOURCES, "vllm")]),
            PYTHONDONTWRITEBYTECODE="1",
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert probe.stdout.split() == ["8", "gfx942", "rocm"]


def test_fixture_amdsmi_refuses_handles_before_init(tmp_path):
    amdsmi = fixture_amdsmi(tmp_path, gpus=True)
    probe = subprocess.run(
        [sys.executable, "-c", "import amdsmi; amdsmi.amdsmi_get_processor_handles()"],
        env=dict(os.environ, PYTHONPATH=str(amdsmi), PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode != 0 and "AMDSMI_STATUS_NOT_INIT" in probe.stderr


def test_amdgpu_dkms_fixture_writes_no_reboot_marker():
    ((_name, _version, _depends, files, scripts),) = build_mirror.amdgpu_packages("30.10.2", "6.14.14", "jammy")
    assert scripts == {}
    assert not any("reboot-required" in str(content) for content in files.values())
    assert files["/usr/src/amdgpu-6.14.14/dkms.conf"].count('PACKAGE_VERSION="6.14.14"') == 1
