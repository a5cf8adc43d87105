"""The fixtures demand what upstream demands: vLLM serves only on a platform amdsmi detects."""

import os
import subprocess
import sys

from tests.harness import build_mirror

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(ROOT, "molecule", "shared", "mirror", "sources")


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


def fixture_pytorch_tree(tmp_path):
    """A copy of the fixture PyTorch checkout, hipified and committed, with a ROCm prefix beside it."""
    import shutil

    tree = tmp_path / "pytorch"
    shutil.copytree(os.path.join(SOURCES, "pytorch"), tree)
    shutil.copy(tree / "torch" / "csrc" / "ops.cu", tree / "torch" / "csrc" / "ops.hip")
    (tree / "third_party" / "fixture-lib").mkdir(parents=True)
    (tree / "third_party" / "fixture-lib" / "VERSION").write_text("fixture-lib 1.0\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], cwd=tree, check=True)
    rocm = tmp_path / "rocm"
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info" / "version").write_text("7.0.2-56\n")
    return tree, rocm


def pytorch_bdist_wheel(tmp_path, tools, extra_env=None):
    """setup.py bdist_wheel in the fixture checkout with git and the given tools ({name: script}) alone on PATH."""
    import shutil

    tree, rocm = fixture_pytorch_tree(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    for name, script in tools.items():
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), "USE_ROCM": "1", "PYTORCH_ROCM_ARCH": "gfx942", "ROCM_PATH": str(rocm)}
    env.update(extra_env or {})
    return bin_dir, subprocess.run(
        [sys.executable, "setup.py", "bdist_wheel"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )


def test_pytorch_setup_fails_as_upstream_without_cmake_on_path(tmp_path):
    _bin_dir, run = pytorch_bdist_wheel(tmp_path, {})
    assert run.returncode != 0
    assert "no cmake or cmake3 with version >= 3.27.0, found: {}" in run.stderr


def test_pytorch_setup_refuses_a_cmake_older_than_upstreams_minimum(tmp_path):
    bin_dir, run = pytorch_bdist_wheel(tmp_path, {"cmake": "#!/bin/sh\necho 'cmake version 3.25.1'\n"})
    assert run.returncode != 0
    assert "version >= 3.27.0, found: {'%s': '3.25.1'}" % (bin_dir / "cmake") in run.stderr


def test_pytorch_setup_would_download_aotriton_without_an_installed_one(tmp_path):
    # cmake/External/aotriton.cmake: flash and memory-efficient attention are on by default and fetch AOTriton.
    _bin_dir, run = pytorch_bdist_wheel(tmp_path, {"cmake": "#!/bin/sh\necho 'cmake version 3.31.6'\n"})
    assert run.returncode != 0
    assert "would download AOTriton 0.11b (the rocm7.0 runtime and the amd-gfx942 image packs)" in run.stderr


def test_pytorch_setup_needs_the_archs_images_in_aotriton_installed_prefix(tmp_path):
    prefix = tmp_path / "aotriton"
    (prefix / "lib" / "aotriton.images" / "amd-gfx90a").mkdir(parents=True)
    (prefix / "lib" / "libaotriton_v2.so").write_text("")
    (prefix / "include" / "aotriton").mkdir(parents=True)
    cmake = {"cmake": "#!/bin/sh\necho 'cmake version 3.31.6'\n"}
    _bin_dir, run = pytorch_bdist_wheel(tmp_path, cmake, {"AOTRITON_INSTALLED_PREFIX": str(prefix)})
    assert run.returncode != 0 and "lacks the kernel images amd-gfx942 for gfx942" in run.stderr
    # Both attention kernels off: AOTriton is not needed at all (the fake cmake then fails the build elsewhere).
    _bin_dir, run = pytorch_bdist_wheel(
        tmp_path / "off", cmake, {"USE_FLASH_ATTENTION": "0", "USE_MEM_EFF_ATTENTION": "OFF"}
    )
    assert "AOTriton" not in run.stderr and "AOTRITON" not in run.stderr


def test_the_fixture_mirror_holds_the_build_time_downloads_where_upstream_serves_them(tmp_path):
    build_mirror.build_download_files(str(tmp_path))
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.tar.gz"))
    release = "files/github.com/ROCm/aotriton/releases/download/0.11b/"
    assert files == [
        release + "aotriton-0.11b-images-amd-gfx90a.tar.gz",
        release + "aotriton-0.11b-images-amd-gfx942.tar.gz",
        release + "aotriton-0.11b-images-amd-gfx950.tar.gz",
        release + "aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz",
        "files/oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-ubuntu-x64.tar.gz",
    ]
    import tarfile

    with tarfile.open(tmp_path / files[-1]) as llvm:
        assert "llvm-7d5de303-ubuntu-x64/lib/cmake/mlir/MLIRConfig.cmake" in llvm.getnames()


def test_the_wheelhouse_serves_what_the_pytorch_fixture_requires():
    import re

    served = {re.split(r"[<>=!~ ;]", line, maxsplit=1)[0].lower() for line in build_mirror.wheel_requirements()}
    with open(os.path.join(SOURCES, "pytorch", "requirements-build.txt")) as handle:
        build = {re.split(r"[<>=!~ ;#]", line.strip(), maxsplit=1)[0].lower() for line in handle if line[:1].isalpha()}
    with open(os.path.join(SOURCES, "pytorch", "setup.py")) as handle:
        runtime_block = handle.read().split("install_requires=[", 1)[1].split("]", 1)[0]
    runtime = {re.split(r"[<>=!~]", name, maxsplit=1)[0].lower() for name in re.findall(r'"([^"]+)"', runtime_block)}
    assert {"cmake", "ninja", "numpy", "pyyaml", "setuptools"} <= build
    assert {"sympy", "networkx", "jinja2", "fsspec", "filelock", "typing-extensions"} == runtime
    assert build | runtime <= served


def fixture_tree(tmp_path, name):
    """A committed copy of a fixture source tree."""
    import shutil

    tree = tmp_path / name
    shutil.copytree(os.path.join(SOURCES, name), tree, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], cwd=tree, check=True)
    return tree


def tools_on_path(tmp_path, tools):
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "git").symlink_to(shutil.which("git"))
    for name, script in tools.items():
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


CMAKE_3 = "#!/bin/sh\necho 'cmake version 3.31.6'\n"
CMAKE_4 = "#!/bin/sh\necho 'cmake version 4.1.2'\n"
NINJA = "#!/bin/sh\necho 1.13.0\n"


def triton_bdist_wheel(tmp_path, tools, extra_env=None):
    tree = fixture_tree(tmp_path, "triton")
    env = dict(PATH=tools_on_path(tmp_path, tools), **(extra_env or {}))
    run = subprocess.run(
        [sys.executable, "setup.py", "bdist_wheel"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    return tree, run


def test_triton_setup_sits_at_the_root_as_from_triton_3_4():
    assert os.path.isfile(os.path.join(SOURCES, "triton", "setup.py"))
    assert not os.path.exists(os.path.join(SOURCES, "triton", "python", "setup.py"))


def test_triton_needs_cmake_below_4_and_ninja_on_path(tmp_path):
    _tree, run = triton_bdist_wheel(tmp_path, {"ninja": NINJA})
    assert run.returncode != 0 and "cmake is not on PATH" in run.stderr
    _tree, run = triton_bdist_wheel(tmp_path / "4", {"cmake": CMAKE_4, "ninja": NINJA})
    assert run.returncode != 0 and "Triton needs cmake>=3.20,<4.0, found 4.1.2" in run.stderr
    _tree, run = triton_bdist_wheel(tmp_path / "n", {"cmake": CMAKE_3})
    assert run.returncode != 0 and "ninja is not on PATH" in run.stderr


def offline_triton_env(tmp_path, **extra):
    """An importable pybind11 (as the build virtualenv has) and an offline build with an LLVM_SYSPATH tree."""
    importable = tmp_path / "site" / "pybind11"
    importable.mkdir(parents=True)
    (importable / "__init__.py").write_text("")
    llvm = tmp_path / "llvm-7d5de303-ubuntu-x64"
    for part in ("include", "lib/cmake/llvm", "lib/cmake/mlir", "lib/cmake/lld", "bin"):
        (llvm / part).mkdir(parents=True, exist_ok=True)
    (llvm / "bin" / "FileCheck").write_text("")
    env = {"PYTHONPATH": str(importable.parent), "TRITON_OFFLINE_BUILD": "1", "TRITON_BUILD_PROTON": "OFF"}
    env["LLVM_SYSPATH"] = str(llvm)
    env.update(extra)
    return env


def test_triton_would_download_llvm_and_nvidias_tools_unless_offline(tmp_path):
    env = offline_triton_env(tmp_path)
    del env["TRITON_OFFLINE_BUILD"], env["LLVM_SYSPATH"]
    _tree, run = triton_bdist_wheel(tmp_path, {"cmake": CMAKE_3, "ninja": NINJA}, env)
    assert run.returncode != 0
    assert (
        "would download LLVM from https://oaitriton.blob.core.windows.net/public/llvm-builds/llvm-7d5de303-"
        in run.stderr
    )
    env["LLVM_SYSPATH"] = str(tmp_path / "llvm-7d5de303-ubuntu-x64")
    _tree, run = triton_bdist_wheel(tmp_path / "nv", {"cmake": CMAKE_3, "ninja": NINJA}, env)
    assert run.returncode != 0 and "would download NVIDIA's ptxas" in run.stderr


def test_triton_offline_needs_each_syspath_as_upstream(tmp_path):
    tools = {"cmake": CMAKE_3, "ninja": NINJA}
    env = offline_triton_env(tmp_path)
    del env["LLVM_SYSPATH"]
    _tree, run = triton_bdist_wheel(tmp_path, tools, env)
    assert run.returncode != 0 and "Requested an offline build but LLVM_SYSPATH is not set" in run.stderr
    # Proton is on by default and needs nlohmann json.
    env = offline_triton_env(tmp_path / "p")
    del env["TRITON_BUILD_PROTON"]
    _tree, run = triton_bdist_wheel(tmp_path / "p", tools, env)
    assert run.returncode != 0 and "Requested an offline build but JSON_SYSPATH is not set" in run.stderr
    env = offline_triton_env(tmp_path / "m")
    (tmp_path / "m" / "llvm-7d5de303-ubuntu-x64" / "lib" / "cmake" / "mlir").rmdir()
    _tree, run = triton_bdist_wheel(tmp_path / "m", tools, env)
    assert run.returncode != 0 and "lacks lib/cmake/mlir" in run.stderr


def test_triton_wheel_takes_its_name_from_triton_wheel_name(tmp_path):
    tree, run = triton_bdist_wheel(
        tmp_path,
        {"cmake": CMAKE_3, "ninja": NINJA},
        offline_triton_env(tmp_path, TRITON_WHEEL_NAME="pytorch-triton-rocm"),
    )
    assert run.returncode == 0, run.stderr
    assert [p.name.split("-")[0] for p in (tree / "dist").iterdir()] == ["pytorch_triton_rocm"]
    _tree, run = triton_bdist_wheel(tmp_path / "bare", {"cmake": CMAKE_3, "ninja": NINJA})
    assert run.returncode != 0 and "pybind11 is not installed" in run.stderr


def test_vllm_build_refuses_cmake_4_as_rocm_build_txt_pins_it(tmp_path):
    tree = fixture_tree(tmp_path, "vllm")
    fake_torch = tmp_path / "torch_stub" / "torch"
    fake_torch.mkdir(parents=True)
    (fake_torch / "__init__.py").write_text("__version__ = '2.9.0'\nclass version:\n    hip = '7.0.2'\n")
    env = {
        "PATH": tools_on_path(tmp_path, {"cmake": CMAKE_4}),
        "PYTHONPATH": str(fake_torch.parent),
        "VLLM_TARGET_DEVICE": "rocm",
        "PYTORCH_ROCM_ARCH": "gfx942",
    }
    run = subprocess.run(
        [sys.executable, "setup.py", "bdist_wheel"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode != 0 and "Compatibility with CMake < 3.5 has been removed" in run.stderr


def test_use_existing_torch_leaves_the_triton_and_amdsmi_pins_as_upstream_does(tmp_path):
    tree = fixture_tree(tmp_path, "vllm")
    subprocess.run([sys.executable, "use_existing_torch.py"], cwd=tree, check=True, capture_output=True)
    build = (tree / "requirements" / "rocm-build.txt").read_text()
    assert "torch" not in build.lower()  # the PyTorch index URL went too
    assert "triton==3.5.0" in build and "amdsmi==6.4.3" in build and "cmake>=3.26.1,<4" in build


def test_vllm_wheel_declares_upstreams_requirement_names():
    with open(os.path.join(SOURCES, "vllm", "requirements", "common.txt")) as handle:
        common = handle.read()
    for name in ("transformers", "fastapi[standard]", "openai", "pydantic", "prometheus_client", "xgrammar"):
        assert "\n" + name in common, name
    with open(os.path.join(SOURCES, "vllm", "setup.py")) as handle:
        assert 'read_requirements("rocm.txt")' in handle.read()


def test_torchvision_without_force_cuda_on_a_gpu_less_host_has_no_hip_operators(tmp_path):
    tree = fixture_tree(tmp_path, "vision")
    stub = tmp_path / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "__version__ = '2.9.0+gitabc'\nclass version:\n    hip = '7.0.2'\nclass cuda:\n"
        "    @staticmethod\n    def is_available():\n        return False\n"
    )
    env = {"PATH": tools_on_path(tmp_path, {}), "PYTHONPATH": str(stub.parent), "ROCM_HOME": "/opt/rocm"}
    run = subprocess.run(
        [sys.executable, "setup.py", "bdist_wheel"], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "hip = None" in (tree / "torchvision" / "version.py").read_text()
    with open(os.path.join(SOURCES, "vision", "setup.py")) as handle:
        assert '"torch==" + torch.__version__' in handle.read()


def test_the_wheelhouse_holds_the_closure_around_the_stacks_own_builds():
    served = build_mirror.wheel_requirements()
    names = {
        line.split("[")[0].split("=")[0].split(">")[0].split("<")[0].split(";")[0].strip().lower() for line in served
    }
    assert not names & {"torch", "torchvision", "triton", "pytorch-triton-rocm", "amdsmi"}
    assert {"transformers", "fastapi", "xgrammar", "timm", "setuptools-scm", "pybind11"} <= names
    assert not any("index" in line for line in served)
    with open(os.path.join(SOURCES, "pytorch", "version.txt")) as handle:
        torch_release = handle.read().strip().split("a")[0]  # 2.9.0a0
    assert dict(line.split("==") for line in build_mirror.BUILT_BY_THE_STACK) == {
        "torch": torch_release,
        "torchvision": "0.24.0",
        "triton": "3.5.0",
    }


def serving_fixture_vllm(tmp_path, api_key):
    """The fixture's `vllm serve` on a free loopback port, with the simulated GPUs; (process, base URL)."""
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    amdsmi = fixture_amdsmi(tmp_path, gpus=True)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(amdsmi), os.path.join(SOURCES, "vllm"), fixture_triton(tmp_path)]),
        PYTHONDONTWRITEBYTECODE="1",
        VLLM_API_KEY=api_key,
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
    )
    server = subprocess.Popen(
        [sys.executable, "-c", "from vllm.entrypoints.cli import main; main()", "serve", "fixture-model"]
        + ["--port", str(port)],
        cwd=str(tmp_path),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):  # noqa: S310 - loopback
                return server, url
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.1)


def post_json(url, body, api_key=None):
    import json
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_fixture_vllm_chat_completions_answer_in_openais_shape_behind_the_api_key(tmp_path):
    server, url = serving_fixture_vllm(tmp_path, "test-key-1")
    try:
        body = {"model": "fixture-model", "messages": [{"role": "user", "content": "first"}]}
        body["messages"] += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "hello there"}]
        assert post_json(url + "/v1/chat/completions", body)[0] == 401
        assert post_json(url + "/v1/chat/completions", body, "wrong-key")[0] == 401
        status, answer = post_json(url + "/v1/chat/completions", body, "test-key-1")
        assert status == 200
        assert answer["object"] == "chat.completion" and answer["id"].startswith("chatcmpl-")
        assert answer["model"] == "fixture-model" and isinstance(answer["created"], int)
        (choice,) = answer["choices"]
        assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
        content = choice["message"]["content"]
        assert "fixture vLLM" in content and "no GPU and no model" in content
        assert content.endswith('You said: "hello there"')
        usage = answer["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
        assert post_json(url + "/v1/chat/completions", dict(body, model="other"), "test-key-1")[0] == 404
        assert post_json(url + "/v1/chat/completions", {"messages": []}, "test-key-1")[0] == 400
    finally:
        server.kill()
        server.wait()


def fixture_triton(tmp_path):
    """The fixture triton package as its wheel installs it: the source tree and the _build_info its build writes."""
    import shutil

    top = tmp_path / "triton-installed"
    if not top.exists():
        shutil.copytree(os.path.join(SOURCES, "triton", "triton"), top / "triton")
        (top / "triton" / "_build_info.py").write_text('commit = "0" * 40\nbackend = "hip"\nllvm = ""\n')
    return str(top)


def triton_runtime(tmp_path, code, **env):
    """Runs code with the fixture triton's runtime importable, its launcher cache in tmp_path."""
    environment = dict(
        os.environ,
        PYTHONPATH=fixture_triton(tmp_path),
        PYTHONDONTWRITEBYTECODE="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
    )
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=str(tmp_path), env=environment, capture_output=True, text=True, check=False
    )


def test_triton_compiles_its_launcher_at_run_time_against_the_python_headers(tmp_path):
    # triton/runtime/build.py: a CPython extension built with the C compiler, imported, cached for the next start.
    run = triton_runtime(tmp_path, "from triton.runtime.build import compile_launcher; print(compile_launcher())")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(str(tmp_path / "triton-cache"))
    assert os.path.isfile(run.stdout.strip())


def test_triton_without_a_c_compiler_fails_with_upstreams_message(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    run = triton_runtime(
        tmp_path, "from triton.runtime.build import compile_launcher; compile_launcher()", PATH=str(empty)
    )
    assert run.returncode != 0
    assert "Failed to find C compiler. Please specify via CC environment variable." in run.stderr


def test_triton_without_the_python_headers_fails_to_compile(tmp_path):
    # A host without python3-dev: the include directory sysconfig names has no Python.h.
    code = "import triton.runtime.build as b; b.python_include_dir = lambda: %r; b.compile_launcher()" % str(
        tmp_path / "no-headers"
    )
    run = triton_runtime(tmp_path, code)
    assert run.returncode != 0
    assert "Python.h" in run.stderr


def test_vllm_serve_dies_at_the_first_kernel_on_a_host_without_a_c_compiler(tmp_path):
    amdsmi = fixture_amdsmi(tmp_path, gpus=True)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(amdsmi), os.path.join(SOURCES, "vllm"), fixture_triton(tmp_path)]),
        PYTHONDONTWRITEBYTECODE="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton-cache"),
        CC=str(tmp_path / "no-such-cc"),
    )
    run = subprocess.run(
        [sys.executable, "-c", "from vllm.entrypoints.cli import main; main()", "serve", "model", "--port", "0"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode != 0
    assert "Triton could not compile its launcher" in run.stderr
    assert "Engine core initialization failed" in run.stderr


def test_the_fixture_aotriton_cmake_lists_the_sha256_of_the_fixture_tarballs(tmp_path):
    # Upstream's interface (pytorch/pytorch cmake/External/aotriton.cmake, AOTriton 0.11b): __AOTRITON_SHA256_LIST
    # holds one hash per entry of __AOTRITON_ROCM_LIST and __AOTRITON_IMAGE_SHA256_LIST one per image, each followed
    # by a comment naming its entry, and each tarball is downloaded with URL_HASH SHA256=<its entry>. The fixture
    # lists the hashes of the tarballs build_mirror.py writes, so the roles' and mirror build's checks pass on the
    # fixture mirror and fail on a changed tarball.
    import hashlib
    import re

    from ansible_collections.instinct.stack.plugins.module_utils.build_downloads import aotriton

    with open(os.path.join(SOURCES, "pytorch", "cmake", "External", "aotriton.cmake")) as handle:
        text = handle.read()

    def listed(variable):
        block = re.search(r"set\(%s\n(.*?)\n\s*\)" % variable, text, re.S).group(1)
        return re.findall(r'^\s*"([^"]*)"(?:\s*#\s*(\S+))?\s*$', block, re.M)

    plan = aotriton(text, build_mirror.RELEASES[0][0], sorted(build_mirror.collection_module("gfx_targets").GFX_ARCHS))
    rocms = [value for value, _comment in listed("__AOTRITON_ROCM_LIST")]
    images = [value for value, _comment in listed("__AOTRITON_IMAGE_LIST")]
    runtime_hashes = listed("__AOTRITON_SHA256_LIST")
    image_hashes = listed("__AOTRITON_IMAGE_SHA256_LIST")
    assert [comment for _hash, comment in runtime_hashes] == rocms
    assert [comment for _hash, comment in image_hashes] == images
    expected_runtime = [
        hashlib.sha256(build_mirror.aotriton_runtime_tarball(plan["version"], rocm)).hexdigest() for rocm in rocms
    ]
    expected_images = [hashlib.sha256(build_mirror.aotriton_image_tarball(image)).hexdigest() for image in images]
    assert ([value for value, _comment in runtime_hashes], [value for value, _comment in image_hashes]) == (
        expected_runtime,
        expected_images,
    ), "the fixture tarballs changed: list these in the fixture aotriton.cmake:\n%s\n%s" % (
        "\n".join('    "%s"  # %s' % pair for pair in zip(expected_runtime, rocms, strict=True)),
        "\n".join('    "%s"  # %s' % pair for pair in zip(expected_images, images, strict=True)),
    )
    # The files the fixture mirror serves are those tarballs: each has the hash the collection's parser reads for its
    # URL, and writing them again gives the same bytes.
    build_mirror.build_download_files(str(tmp_path / "first"))
    build_mirror.build_download_files(str(tmp_path / "second"))
    assert plan["unchecked"] == [] and len(plan["urls"]) == 4
    for url, expected in plan["sha256"].items():
        stored = build_mirror.collection_module("mirror_layout").mirror_file_path(url)
        first = (tmp_path / "first" / stored).read_bytes()
        assert hashlib.sha256(first).hexdigest() == expected, url
        assert (tmp_path / "second" / stored).read_bytes() == first


# PyTorch's cmake/public/LoadHIP.cmake (v2.9.0) finds ROCm by CMake files that only ROCm's -dev packages carry
# (../shared/UPSTREAM.md); the rocm role refuses, on a build host, a rocm_packages list that holds none of the sets
# that install them all (roles/rocm/tasks/build_host.yml). The fixture ROCm's packages and the fixture PyTorch's CMake
# hold the role to that: a list it accepts builds, a list it refuses does not.
ROCM_BUILD_HOST_TASKS = os.path.join(ROOT, "roles", "rocm", "tasks", "build_host.yml")
# Lists the role refuses on a build host: the runtime (the old defaults' "works too"), hip-dev without the libraries'
# -dev packages, and rocm-hip-sdk, which leaves out miopen-hip-dev.
ROCM_LISTS_THAT_CANNOT_BUILD = [
    ["rocm-hip-runtime", "rocm-hip-libraries"],
    ["rocm-dev", "rocm-hip-libraries"],
    ["rocm-hip-runtime-dev", "rocm-ml-libraries"],
    ["rocm-hip-sdk"],
]


def rocm_role_build_sets():
    """The package sets of which the rocm role wants one whole in a build host's rocm_packages."""
    import yaml

    with open(ROCM_BUILD_HOST_TASKS) as handle:
        (task,) = yaml.safe_load(handle)
    return task["vars"]["rocm_build_package_sets"]


def fixture_rocm_install(tmp_path, roots):
    """What apt installs of the fixture ROCm for roots (their dependency closure), laid out under tmp_path/rocm as
    under /opt/rocm-<release>: text files and symlinks as build_mirror.py packs them, each shared library empty."""
    release = build_mirror.RELEASES[0][0]
    packages = {package[0]: package for package in build_mirror.rocm_packages(release, "noble")}
    assert set(roots) <= set(packages), "not fixture ROCm packages: %s" % sorted(set(roots) - set(packages))
    installed, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in packages and name not in installed:
            installed.add(name)
            todo.extend(packages[name][2])
    prefix = tmp_path / "rocm"
    for name in installed:
        for path, content in packages[name][3].items():
            target = prefix / os.path.relpath(path, "/opt/rocm-" + release)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, tuple) and content[0] == "link":
                target.symlink_to(content[1])
            else:
                target.write_text(content if isinstance(content, str) else "")
                target.chmod(0o755 if target.read_text().startswith("#!") else 0o644)
    return prefix


def fixture_loadhip(tmp_path, roots):
    """CMake over the fixture PyTorch's cmake/Dependencies.cmake (its HIP section, which includes its
    cmake/public/LoadHIP.cmake), ROCM_PATH the fixture ROCm that roots install, as the pytorch role sets it. The
    fixture's top-level CMakeLists.txt adds the compiler and targets around it and asks for CMake 3.27 as upstream does,
    more than this machine's may be."""
    import shutil

    import pytest

    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("no cmake on this machine to run the fixture PyTorch's CMake with")
    tmp_path.mkdir(parents=True, exist_ok=True)
    prefix = fixture_rocm_install(tmp_path, roots)
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(loadhip_probe NONE)\ninclude(%s)\n"
        % os.path.join(SOURCES, "pytorch", "cmake", "Dependencies.cmake")
    )
    run = subprocess.run(
        [cmake, "-S", str(driver), "-B", str(tmp_path / "build")],
        env=dict(os.environ, ROCM_PATH=str(prefix)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # CMake wraps its messages at 80 columns.
    return run.returncode, " ".join((run.stdout + run.stderr).split())


def test_fixture_pytorch_on_the_rocm_runtime_alone_finds_no_hip_as_upstream(tmp_path):
    returncode, output = fixture_loadhip(tmp_path, ["rocm-hip-runtime", "rocm-hip-libraries"])
    assert returncode != 0
    # No hip-dev, so no lib/cmake/hip/FindHIP.cmake: upstream's LoadHIP finds no HIP and Dependencies.cmake turns
    # USE_ROCM off (a torch without ROCm); the fixture stops there and says so.
    assert 'No "FindHIP.cmake" found in CMAKE_MODULE_PATH.' in output
    assert "PyTorch's cmake/Dependencies.cmake turns USE_ROCM off here and builds torch without ROCm" in output


def test_fixture_pytorch_needs_each_librarys_dev_package_with_cmakes_own_error(tmp_path):
    # hip-dev (FindHIP.cmake, hip-config.cmake) with the libraries' runtime packages only: the first REQUIRED
    # component stops CMake with the error upstream's build shows.
    returncode, output = fixture_loadhip(tmp_path / "hip", ["rocm-dev", "rocm-hip-libraries"])
    assert returncode != 0 and "hip VERSION: " + build_mirror.HIP_VERSION in output
    assert (
        'Could not find a package configuration file provided by "hipblas" with any of the following names: '
        "hipblasConfig.cmake hipblas-config.cmake" in output
    )
    # rocm-hip-sdk installs hip-dev, hipblas-dev and hipblaslt-dev, and not MIOpen's development package.
    returncode, output = fixture_loadhip(tmp_path / "sdk", ["rocm-hip-sdk"])
    assert returncode != 0 and "hipblas VERSION: 3.0.2" in output
    assert 'Could not find a package configuration file provided by "miopen"' in output


def test_the_rocm_role_accepts_on_a_build_host_exactly_the_lists_the_fixture_pytorch_builds_with(tmp_path):
    accepted = rocm_role_build_sets()
    assert ["rocm"] in accepted
    for index, roots in enumerate(accepted):
        returncode, output = fixture_loadhip(tmp_path / ("accepted%d" % index), roots)
        assert returncode == 0, (roots, output[-3000:])
        for found in ("hip VERSION: " + build_mirror.HIP_VERSION, "hipblas VERSION: 3.0.2", "miopen VERSION: 3.5.0"):
            assert found in output, (roots, found)
        assert "hipblaslt VERSION: 1.0.0" in output and "Compiling with HIP for AMD." in output
    for index, roots in enumerate(ROCM_LISTS_THAT_CANNOT_BUILD):
        assert not any(set(build_set) <= set(roots) for build_set in accepted), roots
        returncode, output = fixture_loadhip(tmp_path / ("refused%d" % index), roots)
        assert returncode != 0, roots


def test_the_rocm_role_refuses_a_runtime_only_list_on_build_hosts_alone(tmp_path):
    """The role's check, run by ansible-playbook: a host of build_hosts, or without that group the first inference
    host, is refused the runtime packages before anything is installed; an inference host takes them."""
    import json

    import yaml

    runtime = ["rocm-hip-runtime", "rocm-hip-libraries"]
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventories = {
        "grouped": {
            "build_hosts": {
                "hosts": {"build1": {"rocm_packages": runtime}, "build2": {"rocm_packages": ["rocm-ml-sdk"]}}
            },
            "inference_hosts": {"hosts": {"gpu1": {"rocm_packages": runtime}}},
        },
        "ungrouped": {"inference_hosts": {"hosts": {"gpu1": {"rocm_packages": runtime}, "gpu2": {}}}},
    }
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Check",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Check",
                            "ansible.builtin.include_role": {"name": "instinct.stack.rocm", "tasks_from": "build_host"},
                        }
                    ],
                }
            ]
        )
    )
    outcomes = {}
    for name, groups in inventories.items():
        (tmp_path / (name + ".yml")).write_text(yaml.safe_dump({"all": {"vars": local, "children": groups}}))
        run = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", name + ".yml", "play.yml"],
            cwd=tmp_path,
            env=dict(
                os.environ,
                ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
                ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"),
            ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        # The role's check by its name (the include and the common role's argument validation run before it).
        (task,) = [
            task
            for play in json.loads(run.stdout)["plays"]
            for task in play["tasks"]
            if task["task"]["name"].endswith("Refuse ROCm packages a build host cannot build PyTorch with")
        ]
        outcomes[name] = {
            host: "refused: " + result["msg"] if result.get("failed") else "skipped" if result.get("skipped") else "ok"
            for host, result in task["hosts"].items()
        }
    grouped, ungrouped = outcomes["grouped"], outcomes["ungrouped"]
    assert (grouped["build2"], grouped["gpu1"], ungrouped["gpu2"]) == ("ok", "skipped", "skipped")
    for refused in (grouped["build1"], ungrouped["gpu1"]):
        assert refused.startswith("refused: ") and "(rocm-hip-runtime, rocm-hip-libraries)" in refused
        assert "add rocm, or rocm-ml-sdk, or rocm-hip-sdk with miopen-hip-dev to this host's rocm_packages" in refused
