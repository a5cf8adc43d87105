"""Build the fixture mirror that the molecule guests install from.

    python -m tests.harness.build_mirror IMAGE_DIR [CACHE_DIR]     prints the mirror directory

(from the checkout's root, or with it on PYTHONPATH: tests/harness/__init__.py)

IMAGE_DIR is the guest image (build-image.sh); its packages.txt says what the guest already has.

The mirror has the layout of AMD's repositories, so the roles use it exactly as the real thing
with only the base URL changed:

    rocm/rocm.gpg.key                             armored signing key (a test key made here)
    rocm/apt/<ROCM>/dists/<suite>/...             ROCm packages: rocm-core, hsa-rocr, rocminfo, hipcc, hipblas, ...
    amdgpu/<AMDGPU>/ubuntu/dists/<suite>/...      amdgpu-dkms
    git/{pytorch,vision,triton,vllm,pytorch-third-party}.git   bare repositories (dumb HTTP) of the fixture
                                                  sources in molecule/shared/mirror/sources/, at the refs in
                                                  SOURCE_REFS
    wheels/                                       the Python build requirements, for pip --find-links
    files/HOST/PATH                               what the real builds download at build time, at the upstream
                                                  URLs the fixture sources name: Triton's prebuilt LLVM
                                                  (cmake/llvm-hash.txt), AOTriton's runtime and image packs
                                                  (PyTorch's cmake/External/aotriton.cmake)
    debian/dists/bookworm/...                     the Debian packages the roles install that the guest
                                                  image lacks (gcc-11 ...), fetched with apt-get download
                                                  and its dependency resolution, index re-signed
    debian/requested.txt                          the packages the roles install (ROLE_PACKAGES), one a line:
                                                  what a mirror built from this one asks for

The packages are small but carry ROCm's package names, versions, dependencies and paths:
/opt/rocm-<ROCM>/ with real shared libraries (libhipblas.so.2 ...), the /opt/rocm alternative that
rocm-core registers, a rocminfo that prints an output captured from an 8x MI300X server, and a
hipcc that compiles host code with a real clang (Debian's, standing in for ROCm's). amdgpu-dkms ships its DKMS
source tree
(/usr/src/amdgpu-VERSION/dkms.conf) and, like the real package, writes no reboot marker. The
result is cached, keyed by this script and the fixtures it reads.
"""

import contextlib
import hashlib
import io
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib

# The mirror CLI's apt index and signing helpers: run this module with the project's .venv python.
from instinct_stack.collection import collection_module
from instinct_stack.mirror import (
    dependency_closure,
    download_wheels,
    new_signing_key,
    write_signed_index,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The fixtures this module builds the mirror from: the source trees and the wheelhouse's requirements.
MIRROR_FIXTURES = os.path.join(REPO, "molecule", "shared", "mirror")
ROCMINFO_FIXTURE = os.path.join(REPO, "tests", "fixtures", "rocminfo", "mi300x-8gpu.txt")
SUITES = ("jammy", "noble")
# (ROCm release, its amdgpu driver release, KFD module version the driver reports)
RELEASES = (("7.0.2", "30.10.2", "6.14.14"),)
# The Debian clang that stands in for ROCm's: the fixture rocm-llvm depends on it, so apt installs it with ROCm.
CLANG_PACKAGE = "clang-16"
# Debian packages that the roles install on the minimal guests of the molecule scenarios: Ansible's apt module
# bootstraps python3-apt and the rocm role installs python3-debian (ansible.builtin.deb822_repository); the toolchain
# role's compilers for Debian 12 (toolchain_* defaults, the distribution's gcc-12 as the fallback); the build host's
# tools (pytorch role: git, python3-venv, python3-dev, ccache) and its artifact store's server (vllm role:
# vllm_store_packages, nginx); the inference host's (vllm role: python3-venv, and python3-dev for Triton's launcher,
# which it compiles at run time). The air-gapped scenario's mirror configuration asks for the same list
# (debian/requested.txt, molecule/shared/templates/airgap-mirror.yml.j2), so a package the roles start to install is
# added here once.
ROLE_PACKAGES = (
    "python3-apt",
    "python3-debian",
    "gcc-11",
    "g++-11",
    "gcc-12",
    "g++-12",
    "git",
    "python3-venv",
    "python3-dev",
    "ccache",
    "nginx",
)
DEBIAN_SUITE = "bookworm"
# What the fixture mirror's Debian subset holds: the roles' packages and what the ROCm fixture depends on
# (CLANG_PACKAGE), which `instinct-stack mirror build` resolves by itself from the ROCm packages' dependencies.
DEBIAN_PACKAGES = (*ROLE_PACKAGES, CLANG_PACKAGE)
SOURCES = os.path.join(MIRROR_FIXTURES, "sources")
# Refs the fixture repositories carry; the build roles' molecule settings name them.
SOURCE_REFS = {"pytorch": "v2.9.0-fixture", "vision": "v0.24.0-fixture", "vllm": "v0.11.1-fixture"}
# The fixture PyTorch's submodule, named as upstream's .gitmodules name theirs (pytorch/pytorch .gitmodules: absolute
# https://github.com/ URLs; ../shared/UPSTREAM.md). Nothing fetches this URL: every clone rewrites it to a mirror.
SUBMODULE_URL = "https://github.com/pytorch/fixture-lib.git"
# What the roles build from source, at the fixtures' versions (sources/pytorch/version.txt, sources/vision,
# sources/triton): the wheelhouse holds the closure around them, never a copy from the index.
BUILT_BY_THE_STACK = ("torch==2.9.0", "torchvision==0.24.0", "triton==3.5.0")
# Names no wheelhouse line may pin: the stack's own builds, and amdsmi, which comes from ROCm's share/amd_smi.
STACK_PROVIDED = {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton-rocm", "amdsmi"}
# The requirements the wheelhouse serves, with their dependency closure.
WHEELHOUSE = os.path.join(MIRROR_FIXTURES, "wheelhouse.txt")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "instinct.stack fixtures",
    "GIT_AUTHOR_EMAIL": "fixtures@instinct-stack.invalid",
    "GIT_COMMITTER_NAME": "instinct.stack fixtures",
    "GIT_COMMITTER_EMAIL": "fixtures@instinct-stack.invalid",
    "GIT_AUTHOR_DATE": "2026-11-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-11-01T00:00:00Z",
}
BUILD_NUMBER = "56"
# HIP's version in the ROCm release (hip-runtime-amd, hip-dev): the one its FindHIP.cmake and hip-config report.
HIP_VERSION = "7.0.51831"


def cmake_config_files(prefix, package, version):
    """The CMake package files of a ROCm -dev package, where rocm-cmake's rocm_export_targets installs them:
    lib/cmake/<package>/<package>-config.cmake and -config-version.cmake, in the devel component, which
    ROCMCreatePackage packs as <name>-dev (ROCm/rocm-cmake ROCMInstallTargets.cmake, ROCMCreatePackage.cmake). That is
    what PyTorch's LoadHIP.cmake finds with find_package; the runtime package (hipblas ...) has the library alone."""
    config_dir = "%s/lib/cmake/%s" % (prefix, package)
    return {
        config_dir + "/%s-config.cmake" % package: (
            "# Fixture of the %s-config.cmake of ROCm's development package: the include directory, as\n"
            "# rocm_export_targets sets it (<name>_INCLUDE_DIR, which LoadHIP.cmake adds to ROCM_INCLUDE_DIRS).\n"
            'get_filename_component(PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)\n'
            'set(%s_INCLUDE_DIR "${PACKAGE_PREFIX_DIR}/include")\n'
            'set(%s_INCLUDE_DIRS "${PACKAGE_PREFIX_DIR}/include")\n' % (package, package, package)
        ),
        config_dir + "/%s-config-version.cmake" % package: (
            'set(PACKAGE_VERSION "%s")\n'
            "if(PACKAGE_FIND_VERSION AND PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)\n"
            "  set(PACKAGE_VERSION_COMPATIBLE FALSE)\n"
            "else()\n"
            "  set(PACKAGE_VERSION_COMPATIBLE TRUE)\n"
            "endif()\n" % version
        ),
    }


def hip_dev_files(prefix, hip_version):
    """hip-dev's CMake files and headers (ROCm/clr hipamd/packaging/CMakeLists.txt installs them in the dev component,
    package hip-dev; hip-runtime-amd has libamdhip64 alone): hip-config.cmake, and ROCm/HIP's cmake/FindHIP.cmake in
    the same directory, which LoadHIP.cmake at v2.9.0 looks for first (find_package(HIP 1.0 MODULE))."""
    major, minor, patch = hip_version.split(".")
    files = cmake_config_files(prefix, "hip", hip_version)
    files[prefix + "/lib/cmake/hip/FindHIP.cmake"] = (
        "# Fixture of ROCm/HIP cmake/FindHIP.cmake, which hip-dev installs in lib/cmake/hip: HIP found in the prefix\n"
        "# this file sits in, with its version.\n"
        'get_filename_component(HIP_ROOT_DIR "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)\n'
        'set(HIP_VERSION_MAJOR "%s")\nset(HIP_VERSION_MINOR "%s")\nset(HIP_VERSION_PATCH "%s")\n'
        'set(HIP_VERSION "%s")\n'
        "include(FindPackageHandleStandardArgs)\n"
        "find_package_handle_standard_args(HIP REQUIRED_VARS HIP_ROOT_DIR VERSION_VAR HIP_VERSION)\n"
        % (major, minor, patch, hip_version)
    )
    files[prefix + "/include/hip/hip_version.h"] = (
        "#pragma once\n#define HIP_VERSION_MAJOR %s\n#define HIP_VERSION_MINOR %s\n#define HIP_VERSION_PATCH %s\n"
        % (major, minor, patch)
    )
    files[prefix + "/include/hip/hip_runtime.h"] = "#pragma once\n#include <hip/hip_version.h>\n"
    return files


def dev_package_files(prefix, package, version, header, soname=None):
    """A library's -dev package: its CMake files, a header and the library's development symlink."""
    files = cmake_config_files(prefix, package, version)
    files["%s/include/%s/%s" % (prefix, package, header)] = "#pragma once\n"
    if soname:
        files["%s/lib/%s" % (prefix, soname.split(".so")[0] + ".so")] = ("link", soname)
    return files


def rocm_packages(rocm, suite):
    """(name, version, depends, files, maintainer scripts) for one ROCm release."""
    major, minor, patch = (int(part) for part in rocm.split("."))
    numeric = "%d%02d%02d" % (major, minor, patch)
    distro = {"jammy": "22.04", "noble": "24.04"}[suite]

    def version(upstream):
        return "%s.%s-%s~%s" % (upstream, numeric, BUILD_NUMBER, distro)

    prefix = "/opt/rocm-%s" % rocm
    with open(ROCMINFO_FIXTURE) as handle:
        rocminfo_output = handle.read()
    return [
        (
            "rocm-core",
            version(rocm),
            [],
            {
                prefix + "/.info/version": "%s-%s\n" % (rocm, BUILD_NUMBER),
                prefix + "/bin/rocm_agent_enumerator": (
                    "#!/bin/sh\n%s/bin/rocminfo | sed -n 's/^  Name: *\\(gfx[0-9a-f]*\\).*/\\1/p'\n" % prefix
                ),
            },
            {
                "postinst": "#!/bin/sh\nset -e\nupdate-alternatives --install /opt/rocm rocm %s %s\n"
                % (prefix, numeric),
                "prerm": "#!/bin/sh\nset -e\nupdate-alternatives --remove rocm %s\n" % prefix,
            },
        ),
        (
            "hsa-rocr",
            version("1.18.0"),
            ["rocm-core"],
            {prefix + "/lib/libhsa-runtime64.so.1.18.0": ("so", "libhsa-runtime64.so.1")},
            {},
        ),
        (
            "rocminfo",
            version("1.0.0"),
            ["rocm-core", "hsa-rocr"],
            {
                prefix + "/bin/rocminfo": "#!/bin/sh\ncat <<'ROCMINFO'\n%sROCMINFO\n" % rocminfo_output,
            },
            {},
        ),
        (
            # Real hipcc runs ROCm's clang from $HIP_CLANG_PATH (default $ROCM_PATH/lib/llvm/bin). Here that clang is
            # Debian's (rocm-llvm below links it in), compiling host code only, so the GCC installation it picks (the
            # newest under /usr/lib/gcc, headers or not) is clang's own choice, as on a real host: the cause of
            # "'cmath' file not found" (pytorch/pytorch#100560, ../shared/UPSTREAM.md "What users hit most").
            "hipcc",
            version("1.1.1"),
            ["rocm-core", "rocm-llvm"],
            {
                prefix + "/bin/hipcc": "#!/bin/bash\n"
                "# Host-only compile: --offload-arch is accepted and logged, the code is built by ROCm's clang.\n"
                "rocm=${ROCM_PATH:-%s}\nclang=${HIP_CLANG_PATH:-$rocm/lib/llvm/bin}/clang++\n"
                'args=()\nfor a in "$@"; do\n  case "$a" in\n'
                '    --offload-arch=*) echo "$a" >>"${HIPCC_ARCH_LOG:-/dev/null}" ;;\n'
                '    *) args+=("$a") ;;\n  esac\ndone\nexec "$clang" "${args[@]}"\n' % prefix,
            },
            {},
        ),
        (
            "hip-runtime-amd",
            version(HIP_VERSION),
            ["rocm-core", "hsa-rocr"],
            {
                prefix + "/lib/libamdhip64.so.7.0.51831": ("so", "libamdhip64.so.7"),
            },
            {},
        ),
        # From here on, as in ROCm: a runtime package carries the shared library alone, its -dev package the CMake
        # files and headers a build finds (hip-dev, hipblas-dev ...). PyTorch's cmake/public/LoadHIP.cmake needs the
        # -dev packages (../shared/UPSTREAM.md); the runtime meta packages (rocm-hip-runtime, rocm-hip-libraries)
        # install none of them, rocm-hip-sdk all but miopen-hip-dev, rocm-ml-sdk and rocm all.
        (
            "hip-dev",
            version(HIP_VERSION),
            ["hip-runtime-amd", "rocm-llvm", "rocm-core"],
            hip_dev_files(prefix, HIP_VERSION),
            {},
        ),
        (
            "hipblas",
            version("3.0.2"),
            ["rocm-core", "hip-runtime-amd"],
            {
                prefix + "/lib/libhipblas.so.3.0": ("so", "libhipblas.so.2"),
            },
            {},
        ),
        (
            "hipblas-dev",
            version("3.0.2"),
            ["hipblas"],
            dev_package_files(prefix, "hipblas", "3.0.2", "hipblas.h", "libhipblas.so.2"),
            {},
        ),
        (
            "hipblaslt",
            version("1.0.0"),
            ["rocm-core", "hip-runtime-amd"],
            {
                prefix + "/lib/libhipblaslt.so.1.0": ("so", "libhipblaslt.so.1"),
                prefix + "/lib/hipblaslt/library/TensileManifest.txt": "gfx90a\ngfx942\ngfx950\n",
            },
            {},
        ),
        (
            "hipblaslt-dev",
            version("1.0.0"),
            ["hipblaslt"],
            dev_package_files(prefix, "hipblaslt", "1.0.0", "hipblaslt.h", "libhipblaslt.so.1"),
            {},
        ),
        # MIOpen, whose Debian packages are named miopen-hip and miopen-hip-dev (its CMake package: miopen).
        (
            "miopen-hip",
            version("3.5.0"),
            ["rocm-core", "hip-runtime-amd"],
            {prefix + "/lib/libMIOpen.so.1.0": ("so", "libMIOpen.so.1")},
            {},
        ),
        (
            "miopen-hip-dev",
            version("3.5.0"),
            ["miopen-hip"],
            dev_package_files(prefix, "miopen", "3.5.0", "miopen.h", "libMIOpen.so.1"),
            {},
        ),
        (
            # ROCm's LLVM (clang, clang++ and libomp under lib/llvm). The fixture's clang is Debian's clang-16, a
            # dependency apt installs from the distribution's repository with ROCm, linked where ROCm's would be.
            "rocm-llvm",
            version("20.0.0.25314"),
            ["rocm-core", CLANG_PACKAGE],
            {
                prefix + "/lib/llvm/lib/libomp.so.20": ("so", "libomp.so.20"),
                prefix + "/lib/llvm/bin/clang": ("link", "/usr/bin/clang-16"),
                prefix + "/lib/llvm/bin/clang++": ("link", "/usr/bin/clang++-16"),
            },
            {},
        ),
        # The meta packages, as AMD's package tables give them (ROCm/rocm-install-on-linux
        # docs/reference/package-manager-integration.rst), over the packages the fixture models.
        ("rocm-hip-runtime", version(rocm), ["rocm-core", "hsa-rocr", "rocminfo", "hip-runtime-amd"], {}, {}),
        ("rocm-hip-libraries", version(rocm), ["rocm-hip-runtime", "hipblas", "hipblaslt"], {}, {}),
        ("rocm-hip-runtime-dev", version(rocm), ["rocm-hip-runtime", "hipcc", "hip-dev", "rocm-llvm"], {}, {}),
        (
            "rocm-hip-sdk",
            version(rocm),
            ["rocm-hip-libraries", "rocm-hip-runtime-dev", "hipblas-dev", "hipblaslt-dev"],
            {},
            {},
        ),
        ("rocm-ml-libraries", version(rocm), ["rocm-hip-libraries", "miopen-hip"], {}, {}),
        ("rocm-ml-sdk", version(rocm), ["rocm-hip-sdk", "rocm-ml-libraries", "miopen-hip-dev"], {}, {}),
        # rocm-dev is in none of AMD's tables: the math libraries' packages depended on it (ROCm/hipBLAS#130) and
        # PyTorch's CI installs it beside rocm-libs (.ci/docker/common/install_rocm.sh), so it carries HIP's
        # development files, not the libraries'.
        ("rocm-dev", version(rocm), ["rocm-hip-runtime-dev"], {}, {}),
        (
            # The amdsmi Python package's source, which vLLM's platform detection imports; vLLM's
            # docker/Dockerfile.rocm_base pip-installs it from here (../shared/UPSTREAM.md, "AMD packages").
            "amd-smi-lib",
            version("26.0.0"),
            ["rocm-core"],
            amd_smi_files(prefix + "/share/amd_smi", rocminfo_output),
            {},
        ),
        ("rocm-developer-tools", version(rocm), ["rocm-core", "amd-smi-lib"], {}, {}),
        ("rocm", version(rocm), ["rocm-developer-tools", "rocm-ml-sdk"], {}, {}),
    ]


def simulated_gpus(rocminfo_output):
    """The GPU agents of a rocminfo output, read by the collection's own rocminfo parser: what the fixture amdsmi
    answers for."""
    agents = collection_module("gfx_detect").rocminfo_agents(rocminfo_output)
    return [
        {"gfx": gpu["gfx"], "market_name": gpu["marketing_name"] or "", "device_id": gpu["pci_device_id"]}
        for gpu in (agent["gpu"] for agent in agents)
    ]


def amd_smi_files(destination, rocminfo_output):
    """sources/amd_smi laid out under destination, with the simulated GPUs written into the package."""
    top = os.path.join(SOURCES, "amd_smi")
    files = {}
    for directory, dirs, names in os.walk(top):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in names:
            path = os.path.join(directory, name)
            with open(path) as handle:
                files[destination + path[len(top) :]] = handle.read()
    files[destination + "/amdsmi/_simulated.py"] = "GPUS = %r\n" % (simulated_gpus(rocminfo_output),)
    return files


def amdgpu_packages(amdgpu, kfd_version, suite):
    distro = {"jammy": "22.04", "noble": "24.04"}[suite]
    return [
        (
            "amdgpu-dkms",
            "1:%s.%s-2212064.%s" % (kfd_version, amdgpu.replace(".", ""), distro),
            [],
            {
                "/usr/src/amdgpu-%s/dkms.conf" % kfd_version: 'PACKAGE_NAME="amdgpu"\nPACKAGE_VERSION="%s"\n'
                % kfd_version,
            },
            # No maintainer scripts: the real package's run dkms to build amdgpu.ko for the running kernel, and
            # write no /var/run/reboot-required (../shared/UPSTREAM.md, "AMD packages and driver": AMD's docs ask
            # for a reboot, nothing in the package marks one). The rocm role must find the pending reboot itself.
            {},
        ),
    ]


def write_files(root, files, workdir, symbol=None):
    """files (path under root -> content) into root: text (executable when it starts with #!), ("link", target) for
    a symlink, or ("so", soname) for a real shared library exporting SYMBOL_fixture_version (symbol: the soname's
    own by default), with its soname link beside it."""
    for path, content in files.items():
        target = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if isinstance(content, tuple) and content[0] == "link":  # the development symlink to a library
            os.symlink(content[1], target)
        elif isinstance(content, tuple):  # a real shared library with this soname
            source = os.path.join(workdir, "lib.c")
            with open(source, "w") as handle:
                handle.write(
                    "int %s_fixture_version(void) { return 1; }\n" % (symbol or re.sub(r"\W", "_", content[1]))
                )
            subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname," + content[1], "-o", target, source], check=True)
            if os.path.basename(target) != content[1]:
                os.symlink(os.path.basename(target), os.path.join(os.path.dirname(target), content[1]))
        else:
            with open(target, "w") as handle:
                handle.write(content)
            os.chmod(target, 0o755 if content.startswith("#!") else 0o644)


def build_deb(workdir, outdir, name, version, depends, files, scripts):
    root = os.path.join(workdir, "%s_%s" % (name, version))
    os.makedirs(os.path.join(root, "DEBIAN"))
    write_files(root, files, workdir, symbol=name.replace("-", "_"))
    control = [
        "Package: " + name,
        "Version: " + version,
        "Architecture: amd64",
        "Maintainer: instinct.stack test fixtures <fixtures@instinct-stack.invalid>",
        "Description: instinct.stack fixture of the ROCm package " + name,
    ]
    if depends:
        control.append("Depends: " + ", ".join(depends))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as handle:
        handle.write("\n".join(control) + "\n")
    for script, body in scripts.items():
        path = os.path.join(root, "DEBIAN", script)
        with open(path, "w") as handle:
            handle.write(body)
        os.chmod(path, 0o755)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, outdir], check=True, stdout=subprocess.DEVNULL
    )


def publish(repo_dir, suite, debs_by_suite, gpg_argv):
    """An apt repository in the layout apt expects: pool/main/SUITE plus a signed dists/SUITE."""
    pool = os.path.join(repo_dir, "pool", "main", suite)
    os.makedirs(pool, exist_ok=True)
    for deb in debs_by_suite:
        shutil.copy(deb, pool)
    write_signed_index(repo_dir, suite, os.path.relpath(pool, repo_dir), gpg_argv, origin="instinct.stack fixtures")
    subprocess.run(
        ["gzip", "-kf9n", os.path.join(repo_dir, "dists", suite, "main", "binary-amd64", "Packages")], check=True
    )


def debian_subset(image_packages_file, workdir):
    """Download DEBIAN_PACKAGES and every dependency the guest image lacks, with apt's own resolver: each package of
    the closure whose candidate here is not the version the image holds (a newer one is an upgrade the guest needs:
    apt's dependencies name exact versions, python3.11-dev's the python3.11 beside it)."""
    with open(image_packages_file) as handle:
        in_image = dict(line.split(" ", 1) for line in handle.read().splitlines() if line.strip())
    closure = dependency_closure([], DEBIAN_PACKAGES)
    candidates = candidate_versions(closure)
    wanted = sorted(name for name in closure if in_image.get(name) != candidates.get(name))
    os.makedirs(workdir, exist_ok=True)
    subprocess.run(["apt-get", "download", "-q", *wanted], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    return [os.path.join(workdir, deb) for deb in sorted(os.listdir(workdir)) if deb.endswith(".deb")]


def candidate_versions(names):
    """The version apt would install of each package here (name -> version)."""
    shown = subprocess.run(
        ["apt-cache", "show", "--no-all-versions", *sorted(names)], check=True, capture_output=True, text=True
    ).stdout
    versions, name = {}, None
    for line in shown.splitlines():
        if line.startswith("Package: "):
            name = line.split(": ", 1)[1]
        elif line.startswith("Version: ") and name:
            versions[name] = line.split(": ", 1)[1]
    return versions


def git(cwd, *args):
    env = dict(os.environ, **GIT_ENV)
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def source_repos(work, out):
    """Commit each fixture source tree and publish it as a bare repository served over dumb HTTP."""

    def commit_tree(name, prepare=None):
        tree = os.path.join(work, "src", name)
        shutil.copytree(os.path.join(SOURCES, name), tree, ignore=shutil.ignore_patterns("__pycache__"))
        git(tree, "init", "-q")
        if prepare:
            prepare(tree)
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "-m", "%s fixture" % name)
        return tree

    def publish_repo(name, tree):
        bare = os.path.join(out, name + ".git")
        git(work, "clone", "-q", "--bare", tree, bare)
        git(bare, "update-server-info")
        return git(bare, "rev-parse", "HEAD")

    os.makedirs(out)
    third_party = commit_tree("pytorch-third-party")
    publish_repo("pytorch-third-party", third_party)
    # Also where a mirror keeps the submodule's absolute upstream URL (git/HOST/PATH.git): the roles reach it there by
    # rewriting https://github.com/ (build_git_rewrites), as they reach the real submodules through a site mirror.
    upstream_style = os.path.join(out, collection_module("mirror_layout").mirror_path(SUBMODULE_URL)[len("git/") :])
    os.makedirs(os.path.dirname(upstream_style))
    git(work, "clone", "-q", "--bare", third_party, upstream_style)
    git(upstream_style, "update-server-info")
    triton_commit = publish_repo("triton", commit_tree("triton"))

    def pin_triton_and_add_submodule(tree):
        pin = os.path.join(tree, ".ci", "docker", "ci_commit_pins", "triton.txt")
        with open(pin, "w") as handle:
            handle.write(triton_commit + "\n")
        git(tree, "submodule", "add", "-q", os.path.join(out, "pytorch-third-party.git"), "third_party/fixture-lib")
        # As upstream's .gitmodules: an absolute https://github.com/ URL, which only a rewrite sends to a mirror.
        git(tree, "config", "-f", ".gitmodules", "submodule.third_party/fixture-lib.url", SUBMODULE_URL)

    pytorch = commit_tree("pytorch", pin_triton_and_add_submodule)
    git(pytorch, "tag", SOURCE_REFS["pytorch"])
    # A ref whose build fails at the hipify step, for the tests of a failed build.
    git(pytorch, "checkout", "-q", "-b", "broken-hipify")
    os.unlink(os.path.join(pytorch, "tools", "amd_build", "build_amd.py"))
    git(pytorch, "commit", "-q", "-am", "break hipify")
    git(pytorch, "checkout", "-q", "main")
    bare = os.path.join(out, "pytorch.git")
    git(work, "clone", "-q", "--bare", pytorch, bare)
    git(bare, "fetch", "-q", pytorch, "refs/tags/*:refs/tags/*", "broken-hipify:broken-hipify")
    git(bare, "update-server-info")
    for name in ("vision", "vllm"):
        tree = commit_tree(name)
        git(tree, "tag", SOURCE_REFS[name])
        publish_repo(name, tree)
        git(os.path.join(out, name + ".git"), "fetch", "-q", tree, "refs/tags/*:refs/tags/*")
        git(os.path.join(out, name + ".git"), "update-server-info")


def _tar_gz(top, files):
    """The bytes of a .tar.gz whose entries sit under top/, as upstream's tarballs are laid out (files: path -> text,
    executable when it starts with #!). The same bytes on every machine and every run, whatever the umask, the clock,
    tar or zlib: fixed owners, modes and times, and gzip's stored (uncompressed) blocks. The fixture aotriton.cmake
    lists the SHA-256 of these bytes, as upstream's lists those of its release tarballs."""
    entries = {}
    for path, content in files.items():
        parts = path.split("/")
        for depth in range(1, len(parts)):
            entries["/".join(parts[:depth])] = None
        entries[path] = content.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for path in [""] + sorted(entries):
            info = tarfile.TarInfo(top + ("/" + path if path else ""))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
            data = entries.get(path)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755 if data.startswith(b"#!") else 0o644
                archive.addfile(info, io.BytesIO(data))
    tar = buffer.getvalue()
    blocks = [tar[start : start + 0xFFFF] for start in range(0, len(tar), 0xFFFF)]
    deflate = b"".join(
        struct.pack("<BHH", int(index == len(blocks) - 1), len(block), len(block) ^ 0xFFFF) + block
        for index, block in enumerate(blocks)
    )
    # RFC 1952 header: deflate, no flags, mtime 0, no extra flags, OS unknown; then CRC-32 and size of the tar.
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + deflate + struct.pack("<II", zlib.crc32(tar), len(tar))


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


# What Triton's CMakeLists.txt reads from LLVM_SYSPATH.
LLVM_FILES = {
    "include/llvm/Config/llvm-config.h": '#define LLVM_VERSION_STRING "fixture"\n',
    "lib/cmake/llvm/LLVMConfig.cmake": "# fixture\n",
    "lib/cmake/mlir/MLIRConfig.cmake": "# fixture\n",
    "lib/cmake/lld/LLDConfig.cmake": "# fixture\n",
    "bin/FileCheck": "#!/bin/sh\nexit 0\n",
}


def aotriton_runtime_tarball(version, rocm):
    """The fixture's AOTriton runtime for a ROCm release (rocm7.0): what the fixture setup.py and torch read. The
    library is a stand-in (nothing loads it; a compiled one would differ by compiler and so change the hash)."""
    return _tar_gz(
        "aotriton",
        {
            "lib/libaotriton_v2.so": "fixture AOTriton %s runtime for %s\n" % (version, rocm),
            "include/aotriton/config.h": '#define AOTRITON_VERSION "%s"\n' % version,
        },
    )


def aotriton_image_tarball(image):
    """The fixture's AOTriton kernel image pack for one image (amd-gfx942)."""
    return _tar_gz("aotriton", {"lib/aotriton.images/%s/__signature__" % image: "fixture %s\n" % image})


def build_download_files(out):
    """files/HOST/PATH: what the fixture sources download at build time, where the collection's own rules
    (plugins/module_utils/build_downloads.py) say upstream serves it, so the roles and `instinct-stack mirror build`
    find them as they would upstream's. The AOTriton tarballs are those whose SHA-256 the fixture aotriton.cmake
    lists (a test holds the two together); the LLVM has none, as upstream's has none (triton-lang/triton#1103)."""
    downloads = collection_module("build_downloads")
    layout = collection_module("mirror_layout")
    with open(os.path.join(SOURCES, "triton", downloads.TRITON_LLVM_HASH_FILE)) as handle:
        llvm = downloads.triton_llvm(handle.read())
    _write(os.path.join(out, layout.mirror_file_path(llvm["url"])), _tar_gz(llvm["name"], LLVM_FILES))
    with open(os.path.join(SOURCES, "pytorch", downloads.AOTRITON_CMAKE_FILE)) as handle:
        cmake = handle.read()
    archs = sorted(collection_module("gfx_targets").GFX_ARCHS)
    for rocm, _amdgpu, _kfd in RELEASES:
        plan = downloads.aotriton(cmake, rocm, archs)
        runtime, images = plan["urls"][0], plan["urls"][1:]
        rocm_name = plan["name"].rsplit("-", 1)[1]
        _write(
            os.path.join(out, layout.mirror_file_path(runtime)), aotriton_runtime_tarball(plan["version"], rocm_name)
        )
        for url in images:
            image = re.search(r"images-(amd-gfx\w+)\.tar", url).group(1)
            _write(os.path.join(out, layout.mirror_file_path(url)), aotriton_image_tarball(image))


def wheel_requirements(path=WHEELHOUSE):
    """The requirement lines of a requirements file, its -r includes expanded, comments and pip options dropped, and
    without what the stack provides itself: every line that mentions torch (vLLM's use_existing_torch.py rule),
    triton and amdsmi (the roles drop those pins from vLLM's files too: the source build and ROCm's own amdsmi)."""
    lines = []
    with open(path) as handle:
        for raw in handle:
            line = raw.split("#", 1)[0].strip()
            if line.startswith("-r "):
                lines += wheel_requirements(os.path.join(os.path.dirname(path), line[3:].strip()))
            elif (
                line
                and not line.startswith("-")
                and "torch" not in line.lower()
                and re.split(r"[\s=<>!~;\[]", line, maxsplit=1)[0].lower() not in STACK_PROVIDED
            ):
                lines.append(line)
    return list(dict.fromkeys(lines))


def wheelhouse(out):
    """Real wheels with their dependency closure, resolved around placeholders for the stack's own builds;
    requirements.txt and built-by-the-stack.txt beside them say what was asked for, so a mirror built from this one
    (instinct-stack mirror build) can ask for the same."""
    requirements = wheel_requirements()
    download_wheels(out, requirements, [], BUILT_BY_THE_STACK, python=sys.executable)
    with open(os.path.join(out, "requirements.txt"), "w") as handle:
        handle.write("".join(line + "\n" for line in requirements))
    with open(os.path.join(out, "built-by-the-stack.txt"), "w") as handle:
        handle.write("".join(line + "\n" for line in BUILT_BY_THE_STACK))


def recipe_key(image_packages_file):
    digest = hashlib.sha256()
    sources = sorted(
        os.path.join(top, name)
        for top, _dirs, names in os.walk(SOURCES)
        for name in names
        if "__pycache__" not in top  # bytecode left by the unit tests that import the fixture sources
    )
    # The rocminfo parser decides which GPUs the fixture amdsmi answers for; build_downloads and mirror_layout where
    # the build-time downloads are stored.
    parser = [
        os.path.join(REPO, "plugins", "module_utils", name)
        for name in ("gfx_detect.py", "gfx_targets.py", "build_downloads.py", "mirror_layout.py")
    ]
    for path in (__file__, ROCMINFO_FIXTURE, WHEELHOUSE, image_packages_file, *parser, *sources):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()[:16]


def default_cache():
    """Where the mirrors are kept when no cache directory is given: INSTINCT_MIRROR_CACHE, else XDG's cache home."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("INSTINCT_MIRROR_CACHE") or os.path.join(xdg, "instinct-stack", "mirror")


@contextlib.contextmanager
def stdout_for_result_only():
    """Sends everything written to stdout (by Python or a child process: apt-get, gpg, git, pip) to stderr while
    the block runs; yields a writer for the one result line, which alone reaches the real stdout (callers read
    stdout whole as the mirror's path)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield lambda line: os.write(saved, (line + "\n").encode())
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with stdout_for_result_only() as result:
        result(build(argv[1], argv[2] if len(argv) > 2 else default_cache()))
    return 0


def build(image_dir, cache):
    """The mirror's directory for this image, built unless cached."""
    image_packages_file = os.path.join(image_dir, "packages.txt")
    out = os.path.join(cache, "mirror-" + recipe_key(image_packages_file))
    if os.path.isfile(os.path.join(out, "rocm", "rocm.gpg.key")):
        return out
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        gpg_argv, public_key = new_signing_key(
            pathlib.Path(work) / "gnupg", "instinct.stack fixture mirror <fixtures@instinct-stack.invalid>"
        )
        staging = os.path.join(work, "mirror")
        os.makedirs(os.path.join(staging, "rocm"))
        with open(os.path.join(staging, "rocm", "rocm.gpg.key"), "w") as handle:
            handle.write(public_key)
        for rocm, amdgpu, kfd_version in RELEASES:
            for suite in SUITES:
                for repo_dir, packages in (
                    (os.path.join(staging, "rocm", "apt", rocm), rocm_packages(rocm, suite)),
                    (os.path.join(staging, "amdgpu", amdgpu, "ubuntu"), amdgpu_packages(amdgpu, kfd_version, suite)),
                ):
                    debs = os.path.join(work, "debs", suite, os.path.basename(repo_dir))
                    os.makedirs(debs, exist_ok=True)
                    for package in packages:
                        build_deb(os.path.join(work, "build"), debs, *package)
                        shutil.rmtree(os.path.join(work, "build"))
                    publish(repo_dir, suite, [os.path.join(debs, deb) for deb in sorted(os.listdir(debs))], gpg_argv)
        publish(
            os.path.join(staging, "debian"),
            DEBIAN_SUITE,
            debian_subset(image_packages_file, os.path.join(work, "debs", "debian")),
            gpg_argv,
        )
        with open(os.path.join(staging, "debian", "requested.txt"), "w") as handle:
            handle.write("".join(package + "\n" for package in ROLE_PACKAGES))
        source_repos(work, os.path.join(staging, "git"))
        wheelhouse(os.path.join(staging, "wheels"))
        build_download_files(staging)
        os.rename(staging, out)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv))
