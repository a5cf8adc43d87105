# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters the roles use: MAX_JOBS, build keys, the build farm's assignment, a validated PYTORCH_ROCM_ARCH,
validated vLLM instances, mirror URLs, and the files the source builds would download."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.instinct.stack.plugins.module_utils import models
from ansible_collections.instinct.stack.plugins.module_utils.build_downloads import (
    TRITON_LLVM_SYSTEM_SUFFIX,
    BuildDownloadError,
    aotriton,
    triton_llvm,
)
from ansible_collections.instinct.stack.plugins.module_utils.build_farm import BuildFarmError, assign, waves
from ansible_collections.instinct.stack.plugins.module_utils.build_plan import build_key, max_jobs
from ansible_collections.instinct.stack.plugins.module_utils.gfx_targets import UnknownArchError, pytorch_rocm_arch
from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import (
    git_config_env,
    git_mirror_rewrites,
    mirror_file_url,
    mirror_url,
)
from ansible_collections.instinct.stack.plugins.module_utils.vllm_options import (
    InvalidInstance,
    hub_models,
    validate_instances,
)


def _max_jobs(cpu_count, mem_total_mb, mem_per_job_mb=4096, reserve_mb=2048, limit=0):
    try:
        return max_jobs(cpu_count, mem_total_mb, mem_per_job_mb, reserve_mb, limit)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _rocm_arch(archs, allow_radeon=False):
    try:
        return pytorch_rocm_arch(archs, allow_radeon)
    except UnknownArchError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _vllm_instances(instances, gpu_count, hip_devices=None, gpu_archs=None, model_root=None, node=None):
    try:
        return validate_instances(instances, int(gpu_count), hip_devices, gpu_archs, model_root, node)
    except InvalidInstance as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _mirror_commits(specs, manifest):
    try:
        return models.mirror_commits(specs, (manifest or {}).get("models"))
    except models.ModelError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _hub_models(instances):
    try:
        return hub_models(instances)
    except InvalidInstance as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _triton_llvm(llvm_hash_text, system_suffix=TRITON_LLVM_SYSTEM_SUFFIX, base_url=None):
    try:
        if base_url:
            return triton_llvm(llvm_hash_text, system_suffix, base_url)
        return triton_llvm(llvm_hash_text, system_suffix)
    except BuildDownloadError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _aotriton_downloads(cmake_text, hip_version, archs):
    try:
        plan = aotriton(cmake_text, hip_version, archs)
    except BuildDownloadError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    for url in plan["unchecked"]:
        # Upstream's own list names no hash for it (an empty entry, or no list at all): nothing to check it against,
        # so it is fetched unchecked. Display shows each warning once however often the filter runs.
        Display().warning(
            "the PyTorch checkout's cmake/External/aotriton.cmake names no SHA-256 for %s: it is fetched without "
            "an integrity check" % url
        )
    return plan


def _build_farm(arch_lists, build_hosts, pinned=None, default_host=None, inventory_hosts=None):
    try:
        return assign(arch_lists, build_hosts, pinned, default_host, inventory_hosts)
    except BuildFarmError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _build_waves(assignment, build_hosts=None):
    return waves(assignment, build_hosts)


def _mirror_file_url(url, base):
    try:
        return mirror_file_url(url, base)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {
            "max_jobs": _max_jobs,
            "build_key": build_key,
            "rocm_arch": _rocm_arch,
            "vllm_instances": _vllm_instances,
            "hub_models": _hub_models,
            "mirror_commits": _mirror_commits,
            "mirror_url": mirror_url,
            "git_mirror_rewrites": git_mirror_rewrites,
            "git_config_env": git_config_env,
            "mirror_file_url": _mirror_file_url,
            "triton_llvm": _triton_llvm,
            "aotriton_downloads": _aotriton_downloads,
            "build_farm": _build_farm,
            "build_waves": _build_waves,
        }
