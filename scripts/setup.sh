#!/usr/bin/env bash
# Prepares this checkout on a fresh Debian 12 machine: apt packages, .venv with pinned versions,
# the instinct-stack command (editable), and ansible-test's offline pip bootstrap.
# Safe to rerun: it installs only what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(
  python3-venv git openssh-client rsync   # venv, ansible-test's file listing, molecule's SSH
  qemu-system-x86 qemu-utils debootstrap  # the molecule guest
  apt-utils gnupg socat                   # the fixture mirror's indexes and signatures; the air-gapped guest's forward
  systemd-container iproute2              # benchmarks/scale.py's lightweight hosts
  shellcheck                              # ansible-test sanity's shellcheck test
  cmake                                   # the unit tests run the fixture PyTorch's CMake against fixture ROCm trees
  zstd                                    # the unit tests pack and unpack stack archives as the vllm role does
)
missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
sudo_cmd=(); [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
# The fixture mirror downloads Debian packages with apt-get download, which needs the package lists.
if ((${#missing[@]})) || ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
  "${sudo_cmd[@]}" apt-get update -qq
fi
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
wanted=$(cat requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ ! -x .venv/bin/python || ! -f $stamp || $(cat "$stamp") != "$wanted" ]]; then
  echo "setup: creating .venv from requirements-dev.txt"
  [[ -x .venv/bin/python ]] || "$python" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
  echo "$wanted" >"$stamp"
fi

# ansible-test fetches a pip bootstrap script from a host outside the package registries; give it ours.
pip_version=$(.venv/bin/python - <<'PY'
import pathlib, re, ansible_test
source = (pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", source).group(1))
PY
)
mkdir -p ~/.ansible/test/cache
install -m 0644 scripts/ansible-test-get-pip.py ~/.ansible/test/cache/get_pip_"${pip_version//./_}".py
