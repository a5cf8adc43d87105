# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a vLLM service instance and turn it into `vllm serve` arguments.

The vllm_service role's meta/argument_specs.yml checks each instance first, when the role starts: required
options, types, choices (dtype, block_size, quantization) and unknown options. This module checks only what an
argument spec cannot express: patterns, ranges, the host's GPUs and their archs, reserved extra_args, an address
beyond loopback without an API key, and names and ports unique across instances. Every check names the instance and
the option, so a bad value stops the rollout before a unit is written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.instinct.stack.plugins.module_utils import models, serving_group

# vLLM's ROCm platform (vllm/platforms/rocm.py, RocmPlatform.supported_quantization at v0.11): the methods it
# accepts, and the ones that need more than a ROCm GPU. bitsandbytes is added only off gfx9 ("warp size 64
# limitation"); the fp8 methods need fp8 hardware (supports_fp8: gfx94*, gfx95*, gfx12*); mxfp4 runs natively on
# gfx95* (supports_mx) and through Triton kernels elsewhere, so it is not restricted here.
# The same list is the quantization option's choices in roles/vllm_service/meta/argument_specs.yml (a unit test keeps
# the two equal); here it names the methods an instance's GPUs can run.
QUANTIZATIONS = (
    "awq",
    "gptq",
    "fp8",
    "compressed-tensors",
    "fbgemm_fp8",
    "gguf",
    "quark",
    "ptpc_fp8",
    "mxfp4",
    "petit_nvfp4",
    "torchao",
    "bitsandbytes",
)
QUANTIZATION_ARCHS = {
    "bitsandbytes": ("not gfx9", lambda gfx: not gfx.startswith("gfx9")),
    "fp8": ("fp8 hardware: gfx94x, gfx95x or gfx12xx", lambda gfx: gfx.startswith(("gfx94", "gfx95", "gfx12"))),
    "fbgemm_fp8": ("fp8 hardware: gfx94x, gfx95x or gfx12xx", lambda gfx: gfx.startswith(("gfx94", "gfx95", "gfx12"))),
    "ptpc_fp8": ("fp8 hardware: gfx94x, gfx95x or gfx12xx", lambda gfx: gfx.startswith(("gfx94", "gfx95", "gfx12"))),
}
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# The options' defaults, as in roles/vllm_service/meta/argument_specs.yml (a unit test keeps them equal): role
# argument validation checks the variables but does not fill them in.
DEFAULTS = {
    "host": "127.0.0.1",
    "port": 8000,
    "gpus": [],
    "dtype": "auto",
    "gpu_memory_utilization": 0.9,
    # vLLM chooses the block size per attention backend (its ROCm sparse-MLA path needs 1), so `--block-size`
    # is passed only when the instance sets one.
    "block_size": None,
    "tensor_parallel_size": 1,
    # A serving group (serving_group.py): the inventory hosts of one model, the head first, one pipeline stage each.
    "nodes": [],
    "pipeline_parallel_size": 1,
    "max_model_len": None,
    "quantization": None,
    "served_model_name": None,
    "extra_args": [],
    "api_key": "",
    "allow_unauthenticated": False,
}
# Options the user may not pass through extra_args: they are set from validated fields, or are secrets.
RESERVED = (
    "--host",
    "--port",
    "--api-key",
    "--gpu-memory-utilization",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--distributed-executor-backend",
    "--dtype",
    "--block-size",
    "--quantization",
    "--max-model-len",
)


class InvalidInstance(ValueError):
    pass


def is_loopback(host):
    """Whether vLLM bound to host answers this machine alone: 127.0.0.0/8, ::1 (also IPv4-mapped) or localhost.

    Anything else is not: 0.0.0.0 and :: (every address), another address, a name that could resolve elsewhere, and
    an empty host (vLLM then binds every address).
    """
    host = str(host or "").strip()
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def _int(instance, key, minimum=None, maximum=None):
    value = instance[key]
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 10)
        except ValueError:
            raise InvalidInstance(
                "vLLM instance %r: %s must be an integer, got %r" % (instance["name"], key, instance[key])
            ) from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InvalidInstance(
            "vLLM instance %r: %s must be between %s and %s, got %s" % (instance["name"], key, minimum, maximum, value)
        )
    return value


def served_link(model_root, name):
    """The link an instance serves its Hub model through: model_root/served/NAME, pointing at the revision."""
    return os.path.join(model_root, "served", name)


def _hub_spec(name, model):
    """A Hub model's options checked, with their defaults and its key (REPO@REVISION); errors name the instance."""
    try:
        spec = models.check_spec(model)
    except models.ModelError as exc:
        raise InvalidInstance("vLLM instance %r: %s" % (name, exc)) from None
    spec["key"] = models.model_key(spec["repo"], spec["revision"])
    return spec


def _model(merged, model_root):
    """The instance's model: a path or cached name as given, or a Hub repository at a revision ({repo, revision,
    files, ignore}), which the instance serves offline through its link to the revision the models role pulled."""
    name, model = merged["name"], merged.get("model")
    if isinstance(model, dict):
        spec = _hub_spec(name, model)
        if not model_root:
            raise InvalidInstance(
                "vLLM instance %r: a Hub model needs the models directory (instinct_model_root)" % name
            )
        merged["model_key"] = spec.pop("key")
        merged["model"] = spec
        merged["model_path"] = served_link(model_root, name)
        if not merged["served_model_name"]:
            merged["served_model_name"] = spec["repo"]  # what clients ask for, not the link's path
        return
    if not isinstance(model, str) or not model.strip():
        raise InvalidInstance(
            "vLLM instance %r: model must be a model directory, a cached model name, or a Hub repository at a "
            "revision ({repo: ORG/NAME, revision: COMMIT}), got %r" % (name, model)
        )
    merged["model_key"] = None
    merged["model_path"] = model


def validate_instance(instance, gpu_count, gpu_archs=None, model_root=None):
    """Return the instance with defaults filled in and every value checked; raise InvalidInstance otherwise.

    gpu_archs holds the gfx target of each of the host's compute GPUs, for the checks that depend on the arch;
    model_root is where a Hub model's revisions and the instances' links to them are (instinct_model_root).
    """
    if not isinstance(instance, dict):
        raise InvalidInstance("a vLLM instance must be a mapping, got %r" % (instance,))
    merged = dict(DEFAULTS)
    merged.update(instance)
    name = merged.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidInstance(
            "vLLM instance name %r must be lower-case letters, digits and dashes (at most 40)" % (name,)
        )
    _model(merged, model_root)
    merged["port"] = _int(merged, "port", 1, 65535)
    merged["block_size"] = _int(merged, "block_size") if merged["block_size"] not in (None, "") else None
    try:
        utilization = float(merged["gpu_memory_utilization"])
    except (TypeError, ValueError):
        raise InvalidInstance(
            "vLLM instance %r: gpu_memory_utilization must be a number in (0, 1], got %r"
            % (name, merged["gpu_memory_utilization"])
        ) from None
    if not 0 < utilization <= 1:
        raise InvalidInstance(
            "vLLM instance %r: gpu_memory_utilization must be in (0, 1], got %s" % (name, utilization)
        )
    merged["gpu_memory_utilization"] = utilization
    gpus = [int(gpu) for gpu in merged["gpus"]]
    if any(gpu < 0 or gpu >= gpu_count for gpu in gpus):
        raise InvalidInstance(
            "vLLM instance %r: gpus %s name GPUs the host does not have (it has %d)" % (name, gpus, gpu_count)
        )
    merged["gpus"] = gpus
    archs = list(gpu_archs or [])
    used = sorted(set(archs[gpu] for gpu in gpus if gpu < len(archs)) if gpus else set(archs))
    if merged["quantization"] in QUANTIZATION_ARCHS:
        needs, supported = QUANTIZATION_ARCHS[merged["quantization"]]
        refused = [gfx for gfx in used if not supported(gfx)]
        if refused:
            raise InvalidInstance(
                "vLLM instance %r: quantization %r needs %s (vllm/platforms/rocm.py), and its GPUs are %s; choose "
                "another method (%s) or other gpus"
                % (
                    name,
                    merged["quantization"],
                    needs,
                    ", ".join(refused),
                    ", ".join(
                        q
                        for q in QUANTIZATIONS
                        if q not in QUANTIZATION_ARCHS or all(QUANTIZATION_ARCHS[q][1](gfx) for gfx in used)
                    ),
                )
            )
    available = len(gpus) or gpu_count
    merged["tensor_parallel_size"] = _int(merged, "tensor_parallel_size", 1, max(available, 1))
    merged["pipeline_parallel_size"] = _int(merged, "pipeline_parallel_size", 1)
    try:
        serving_group.check_shape(merged)
    except serving_group.InvalidGroup as exc:
        raise InvalidInstance(str(exc)) from None
    merged["nodes"] = list(merged["nodes"] or [])
    if merged["max_model_len"] not in (None, ""):
        merged["max_model_len"] = _int(merged, "max_model_len", 1)
    extra = [str(arg) for arg in merged["extra_args"]]
    clash = [arg for arg in extra if arg.split("=", 1)[0] in RESERVED]
    if clash:
        raise InvalidInstance(
            "vLLM instance %r: extra_args may not set %s; use the instance's own options" % (name, ", ".join(clash))
        )
    merged["extra_args"] = extra
    try:
        merged["allow_unauthenticated"] = boolean(merged["allow_unauthenticated"], strict=True)
    except TypeError:
        raise InvalidInstance(
            "vLLM instance %r: allow_unauthenticated must be true or false, got %r"
            % (name, merged["allow_unauthenticated"])
        ) from None
    has_key = bool(str(merged["api_key"] or "").strip())
    if not has_key and not merged["allow_unauthenticated"] and not is_loopback(merged["host"]):
        raise InvalidInstance(
            "vLLM instance %r: host %s is not a loopback address and the instance has no api_key, so anyone who "
            "reaches port %s could use the model; set api_key (from an ansible-vault file), bind host to 127.0.0.1, "
            "or set allow_unauthenticated: true to accept a service without authentication"
            % (name, merged["host"] or "(empty: every address)", merged["port"])
        )
    return merged


def serve_args(instance):
    """`vllm serve` arguments for a validated instance. The API key is never among them."""
    args = [
        str(instance["model_path"]),
        "--host",
        instance["host"],
        "--port",
        str(instance["port"]),
        "--dtype",
        instance["dtype"],
        "--gpu-memory-utilization",
        repr(instance["gpu_memory_utilization"]),
        "--tensor-parallel-size",
        str(instance["tensor_parallel_size"]),
    ]
    if instance["nodes"]:
        # More than one node runs on Ray only (vLLM's docs, "Multi-node deployment"); without the backend vLLM looks
        # for every GPU on the head.
        args += ["--pipeline-parallel-size", str(instance["pipeline_parallel_size"])]
        args += ["--distributed-executor-backend", "ray"]
    if instance["block_size"]:
        args += ["--block-size", str(instance["block_size"])]
    if instance["max_model_len"]:
        args += ["--max-model-len", str(instance["max_model_len"])]
    if instance["quantization"]:
        args += ["--quantization", instance["quantization"]]
    if instance["served_model_name"]:
        args += ["--served-model-name", str(instance["served_model_name"])]
    return args + instance["extra_args"]


def hip_visible_devices(gpus, hip_devices=None):
    """HIP_VISIBLE_DEVICES for an instance: its gpus (indexes among the host's compute GPUs) as HIP indices.

    hip_devices holds the HIP index of each compute GPU (gfx_arch's hip_visible_devices): HIP also numbers the
    GPUs gfx_arch left out (APU graphics, a display card). Empty when the instance may see every GPU HIP sees.
    """
    if isinstance(hip_devices, str):
        hip_devices = [int(part) for part in hip_devices.split(",") if part.strip()]
    hip_devices = [int(index) for index in hip_devices or []]
    if gpus:
        return ",".join(str(hip_devices[gpu] if hip_devices else gpu) for gpu in gpus)
    if hip_devices and hip_devices != list(range(len(hip_devices))):
        return ",".join(str(index) for index in hip_devices)  # hide the GPUs that are not compute targets
    return ""


def group_units(instance, node):
    """The systemd units an instance runs on node, and its part there: an instance on one host runs
    vllm-NAME.service; a serving group's head runs its Ray head (vllm-NAME-ray.service) and `vllm serve`, each other
    node its Ray worker. Raises InvalidInstance when node is none of the group's nodes."""
    name, nodes = instance["name"], instance["nodes"]
    if not nodes:
        return None, ["vllm-%s.service" % name]
    if node is None or node not in nodes:
        raise InvalidInstance(
            "vLLM instance %r is a serving group of %s, and this host (%s) is none of its nodes: give the instance to "
            "its nodes only (for example in the group_vars of an inventory group of them)"
            % (name, ", ".join(nodes), node)
        )
    if node == nodes[0]:
        return "head", ["vllm-%s-ray.service" % name, "vllm-%s.service" % name]
    return "worker", ["vllm-%s-ray.service" % name]


def validate_instances(instances, gpu_count, hip_devices=None, gpu_archs=None, model_root=None, node=None):
    """Validate every instance (names and ports unique on a host); the result holds no API key.

    node: this host's inventory name, which places it in its serving groups (head or worker)."""
    validated = [validate_instance(instance, gpu_count, gpu_archs, model_root) for instance in instances]
    groups = [instance["name"] for instance in validated if instance["nodes"]]
    if len(groups) > 1:
        # Each group runs its own Ray cluster, whose head listens on Ray's port.
        raise InvalidInstance(
            "vLLM instances %s are serving groups on one host: a host is a node of one serving group at most"
            % ", ".join(repr(name) for name in groups)
        )
    for field in ("name", "port"):
        values = [instance[field] for instance in validated]
        duplicates = sorted(set(value for value in values if values.count(value) > 1))
        if duplicates:
            raise InvalidInstance("vLLM instances share a %s: %s" % (field, ", ".join(str(d) for d in duplicates)))
    for instance in validated:
        instance["group_role"], instance["units"] = group_units(instance, node)
        instance["serve_args"] = serve_args(instance)
        instance["hip_visible_devices"] = hip_visible_devices(instance["gpus"], hip_devices)
        # The result is shown in task output; the key stays in the caller's (vaulted) variables only.
        instance["has_api_key"] = bool(str(instance.pop("api_key") or "").strip())
    return validated


def hub_models(instances):
    """The Hub models the instances serve, each once ({repo, revision, files, ignore, key}, key REPO@REVISION), in
    the instances' order; a repository at one revision asked with two file selections is refused."""
    found = {}
    for instance in instances or []:
        model = instance.get("model") if isinstance(instance, dict) else None
        if not isinstance(model, dict):
            continue
        spec = _hub_spec(instance.get("name"), model)
        other = found.setdefault(spec["key"], spec)
        if (other["files"], other["ignore"]) != (spec["files"], spec["ignore"]):
            raise InvalidInstance(
                "vLLM instance %r: %s is asked with other files or ignore than another instance's; one revision is "
                "pulled once, with one selection: give both instances the same" % (instance.get("name"), spec["key"])
            )
    return list(found.values())
