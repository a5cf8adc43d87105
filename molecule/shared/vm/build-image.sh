#!/usr/bin/env bash
# Builds the Debian 12 guest image that the molecule scenarios boot with qemu or systemd-nspawn; with
# INSTINCT_GUEST_SUITE=trixie the same minimal server of Debian 13, the other release of the cluster scenario's mixed
# fleet. The image is cached, keyed by this recipe and the suite, so only a changed recipe rebuilds it.
# Usage: build-image.sh [CACHE_DIR]   prints the directory holding disk.img, vmlinuz, initrd.img
set -euo pipefail
# stdout carries the image directory and nothing else (callers read it whole): every other line, ours or a tool's
# (mke2fs says "Creating regular file ..."), goes to stderr.
exec 3>&1 1>&2

recipe_dir=$(cd "$(dirname "$0")" && pwd)
cache_root=${1:-${INSTINCT_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/instinct-stack/vm}}
suite=${INSTINCT_GUEST_SUITE:-bookworm}
mirror=${INSTINCT_DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
# What a minimal server install holds (Debian's netinst with only "SSH server", or Ubuntu Server minimized): a kernel,
# systemd, an SSH server, sudo and python3 for Ansible, and nothing the roles need. Everything else (python3-apt,
# python3-debian, python3-venv, python3-dev, git, the compilers, the clang that the fixture rocm-llvm depends on) the
# roles install themselves, from the fixture mirror's Debian subset or, air-gapped, from `instinct-stack mirror build`'s
# distribution packages: a package added here would hide a role that forgot it.
packages=linux-image-amd64,systemd-sysv,udev,dbus,openssh-server,sudo,python3,kmod,iproute2,ca-certificates,procps,less
# curl is the verifiers' HTTP client on the hosts (testinfra runs it); no role uses it (tests/unit/harness checks).
packages+=,curl
disk_size=6G

key=$({ echo "$suite"; cat "$recipe_dir/build-image.sh" "$recipe_dir"/guest-files/*; } | sha256sum | cut -c1-16)
out="$cache_root/$suite-$key"
if [[ -f "$out/disk.img" && -f "$out/vmlinuz" && -f "$out/initrd.img" && -f "$out/packages.txt" ]]; then
  echo "$out" >&3
  exit 0
fi

work=$(mktemp -d "$cache_root.build.XXXXXX" 2>/dev/null || { mkdir -p "$cache_root"; mktemp -d "$cache_root/.build.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "building guest image $key in $work (debootstrap $suite from $mirror)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# Guest configuration: DHCP on the virtio NIC, DNS from qemu's user network, an SSH key from the kernel command line.
install -m 0644 "$recipe_dir/guest-files/10-dhcp.network" "$rootfs/etc/systemd/network/10-dhcp.network"
install -m 0755 "$recipe_dir/guest-files/instinct-ssh-key" "$rootfs/usr/local/sbin/instinct-ssh-key"
install -m 0644 "$recipe_dir/guest-files/instinct-ssh-key.service" "$rootfs/etc/systemd/system/instinct-ssh-key.service"
ln -sf /etc/systemd/system/instinct-ssh-key.service "$rootfs/etc/systemd/system/multi-user.target.wants/instinct-ssh-key.service"
ln -sf /lib/systemd/system/systemd-networkd.service "$rootfs/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
echo "nameserver 10.0.2.3" >"$rootfs/etc/resolv.conf"
echo "instinct-guest" >"$rootfs/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 instinct-guest\n' >"$rootfs/etc/hosts"
echo "/dev/vda / ext4 defaults 0 1" >"$rootfs/etc/fstab"
# The guest must reach nothing but the fixture mirror, so it starts with no apt sources of its own.
rm -f "$rootfs/etc/apt/sources.list" "$rootfs"/etc/apt/sources.list.d/*
chroot "$rootfs" useradd -m -s /bin/bash -G sudo ansible
echo "ansible ALL=(ALL) NOPASSWD: ALL" >"$rootfs/etc/sudoers.d/ansible"
chmod 0440 "$rootfs/etc/sudoers.d/ansible"
chroot "$rootfs" apt-get clean
# The fixture mirror serves only the distribution packages that the guest lacks.
# Name and version: the subset must carry a newer version of an image package that another one needs (python3.11-dev
# from bookworm-security depends on the same python3.11, newer than the one debootstrap took from bookworm).
chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n' | sort -u >"$work/packages.txt"
rm -f "$rootfs"/etc/ssh/ssh_host_*key*  # regenerated per guest at boot
cp -L "$rootfs/vmlinuz" "$work/vmlinuz"
cp -L "$rootfs/initrd.img" "$work/initrd.img"
mkfs.ext4 -q -F -L instinct-root -d "$rootfs" "$work/disk.img" "$disk_size"
mkdir -p "$out.tmp"
mv "$work/disk.img" "$work/vmlinuz" "$work/initrd.img" "$work/packages.txt" "$out.tmp/"
mv "$out.tmp" "$out"
echo "$out" >&3
