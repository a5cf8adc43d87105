#!/usr/bin/env bash
# The baseline benchmarks/scale.py measures instinct.stack against: the per-host script a user writes
# from the field guides (AMD's "Ubuntu native installation" for ROCm, PyTorch's and vLLM's "build from
# source for ROCm" pages), doing the same steps as site.yml on one host. Run on the host as root:
#
#   MIRROR=http://mirror:port bash field_guide_rollout.sh
#
# It takes everything from the same mirror the collection uses (ROCm and amdgpu apt repositories,
# git repositories, wheelhouse), so both do the same work. As in the guides, every step runs every
# time: a rerun downloads, rebuilds and restarts again.
set -euo pipefail

: "${MIRROR:?set MIRROR to the mirror URL}"
ROCM_VERSION=${ROCM_VERSION:-7.0.2}
AMDGPU_VERSION=${AMDGPU_VERSION:-30.10.2}
UBUNTU_SUITE=${UBUNTU_SUITE:-jammy}
PYTORCH_VERSION=${PYTORCH_VERSION:-v2.9.0-fixture}
VLLM_VERSION=${VLLM_VERSION:-v0.11.1-fixture}
VISION_VERSION=${VISION_VERSION:-v0.24.0-fixture}
SERVICE_USER=${SERVICE_USER:-ansible}
VLLM_MODEL=${VLLM_MODEL:-fixture-model}
VLLM_PORT=${VLLM_PORT:-8000}
SRC=${SRC:-/opt/src}
VENV=${VENV:-/opt/vllm-venv}
MIRROR_HOST=$(echo "$MIRROR" | sed -E 's#^[a-z]+://([^:/]+).*#\1#')
PIP_ARGS=(--no-index --find-links "$MIRROR/wheels/" --trusted-host "$MIRROR_HOST" --disable-pip-version-check)

step() { echo "field-guide: $*"; }

step "ROCm apt repositories"
install -d -m 0755 /etc/apt/keyrings
curl -fsSL "$MIRROR/rocm/rocm.gpg.key" -o /etc/apt/keyrings/rocm.asc
cat >/etc/apt/sources.list.d/rocm.list <<EOF
deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.asc] $MIRROR/amdgpu/$AMDGPU_VERSION/ubuntu $UBUNTU_SUITE main
deb [arch=amd64 signed-by=/etc/apt/keyrings/rocm.asc] $MIRROR/rocm/apt/$ROCM_VERSION $UBUNTU_SUITE main
EOF
printf 'Package: *\nPin: origin %s\nPin-Priority: 600\n' "$MIRROR_HOST" >/etc/apt/preferences.d/rocm-pin-600
apt-get update -q

step "ROCm and amdgpu-dkms"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends amdgpu-dkms rocm
usermod -a -G render,video "$SERVICE_USER"

step "GCC 11 through update-alternatives"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc-11 g++-11
update-alternatives --install /usr/bin/gcc gcc /usr/bin/gcc-11 110 --slave /usr/bin/g++ g++ /usr/bin/g++-11
update-alternatives --set gcc /usr/bin/gcc-11

step "dynamic linker entries"
printf '/opt/rocm/lib\n/opt/rocm/lib64\n' >/etc/ld.so.conf.d/rocm.conf
ldconfig

step "PyTorch from source"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git python3-venv python3-dev
rm -rf "$SRC" "$VENV"
mkdir -p "$SRC"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" setuptools wheel
# PyTorch's .gitmodules name absolute https://github.com/ URLs: with no internet, a site points them at its own git
# mirror, as the collection's build_git_rewrites does.
git config --global url."$MIRROR/git/github.com/".insteadOf https://github.com/
git clone -q --recursive -b "$PYTORCH_VERSION" "$MIRROR/git/pytorch.git" "$SRC/pytorch"
ARCH=$(/opt/rocm/bin/rocminfo | grep -o -m1 'gfx[0-9a-f]*')
cd "$SRC/pytorch"
# The guides' "pip install -r requirements.txt" step, with the venv activated (cmake and ninja on PATH).
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" -r requirements-build.txt
"$VENV/bin/python" tools/amd_build/build_amd.py
# Air-gapped, what the build would download comes from the mirror: AOTriton's runtime and this arch's images.
AOTRITON=$MIRROR/files/github.com/ROCm/aotriton/releases/download/0.11b
mkdir -p "$SRC/aotriton"
for tarball in aotriton-0.11b-manylinux_2_28_x86_64-rocm7.0-shared.tar.gz "aotriton-0.11b-images-amd-$ARCH.tar.gz"; do
  curl -fsS "$AOTRITON/$tarball" | tar -xz --strip-components=1 -C "$SRC/aotriton"
done
PYTORCH_ROCM_ARCH=$ARCH USE_ROCM=1 MAX_JOBS=$(nproc) ROCM_PATH=/opt/rocm PATH=$VENV/bin:/opt/rocm/bin:$PATH \
  AOTRITON_INSTALLED_PREFIX="$SRC/aotriton" "$VENV/bin/python" setup.py -q bdist_wheel
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" dist/torch-*.whl
step "built torch for $ARCH"

step "Triton at PyTorch's pinned commit"
git clone -q "$MIRROR/git/triton.git" "$SRC/triton"
git -C "$SRC/triton" checkout -q "$(cat .ci/docker/ci_commit_pins/triton.txt)"
cd "$SRC/triton"
# Triton's prebuilt LLVM, named by its cmake/llvm-hash.txt, from the mirror; nothing else downloaded.
LLVM=llvm-$(head -c 8 cmake/llvm-hash.txt)-ubuntu-x64
curl -fsS "$MIRROR/files/oaitriton.blob.core.windows.net/public/llvm-builds/$LLVM.tar.gz" | tar -xz -C "$SRC"
# Triton's build requirements, as its README has them installed first (python/requirements.txt upstream).
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" "cmake>=3.20,<4.0" "ninja>=1.11.1" "pybind11>=2.13.1"
PATH=$VENV/bin:$PATH TRITON_OFFLINE_BUILD=1 TRITON_BUILD_PROTON=OFF LLVM_SYSPATH="$SRC/$LLVM" \
  "$VENV/bin/python" setup.py -q bdist_wheel
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" dist/triton-*.whl

step "torchvision from source against that torch"
# vLLM's requirements pull torchvision (through timm); the index's is a CUDA build, so the ROCm guides build it from
# source against the torch just built, with FORCE_CUDA=1 on a machine that compiles without a GPU.
git clone -q -b "$VISION_VERSION" "$MIRROR/git/vision.git" "$SRC/vision"
cd "$SRC/vision"
FORCE_CUDA=1 ROCM_HOME=/opt/rocm PYTORCH_ROCM_ARCH=$ARCH "$VENV/bin/python" setup.py -q bdist_wheel
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" dist/torchvision-*.whl

step "vLLM against the existing torch"
git clone -q -b "$VLLM_VERSION" "$MIRROR/git/vllm.git" "$SRC/vllm"
cd "$SRC/vllm"
"$VENV/bin/python" use_existing_torch.py
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" -r requirements/rocm.txt
# The guide builds on ROCm's base image, which has cmake; here it comes from the index, within rocm-build.txt's bound,
# and setup.py runs it by name from the virtualenv.
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" "cmake>=3.26.1,<4"
PATH=$VENV/bin:$PATH PYTORCH_ROCM_ARCH=$ARCH VLLM_TARGET_DEVICE=rocm "$VENV/bin/python" setup.py -q bdist_wheel
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" dist/vllm-*.whl
# vLLM's platform detection needs amdsmi, which ROCm ships as source (as vLLM's Dockerfile.rocm_base installs it).
cp -r /opt/rocm/share/amd_smi "$SRC/amd_smi"
"$VENV/bin/pip" install -q "${PIP_ARGS[@]}" "$SRC/amd_smi"
"$VENV/bin/python" -c 'import torch, triton, vllm; assert torch.version.hip'
"$VENV/bin/python" -c 'from vllm.platforms import current_platform as p; assert p.device_name == "rocm"'

step "vLLM systemd service"
cat >/etc/systemd/system/vllm.service <<EOF
[Unit]
Description=vLLM server
After=network-online.target

[Service]
User=$SERVICE_USER
EnvironmentFile=/etc/default/vllm
ExecStart=$VENV/bin/vllm serve $VLLM_MODEL --host 127.0.0.1 --port $VLLM_PORT
Restart=on-failure

[Install]
WantedBy=multi-user.target
EOF
install -m 0600 /dev/null /etc/default/vllm
echo "VLLM_API_KEY=${VLLM_API_KEY:-}" >/etc/default/vllm
systemctl daemon-reload
systemctl enable -q vllm
systemctl restart vllm
for _ in $(seq 120); do
  curl -fs "http://127.0.0.1:$VLLM_PORT/health" >/dev/null && break
  sleep 1
done
curl -fs "http://127.0.0.1:$VLLM_PORT/health" >/dev/null
step "done"
