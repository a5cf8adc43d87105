"""The vllm_service role's argument_specs and the vllm_instances filter split the checks between them.

The spec is validated here as Ansible validates it when the role starts (ArgumentSpecValidator with
validate_role_argument_spec, what the role's implicit validate_argument_spec task runs); the filter's own checks
are in tests/unit/plugins/module_utils/test_vllm_options.py.
"""

import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.instinct.stack.plugins.module_utils import vllm_options

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPECS = os.path.join(ROOT, "roles", "vllm_service", "meta", "argument_specs.yml")


# Options whose default is a role variable, applied by the role's tasks rather than the filter: health_timeout
# (vllm_service_health_timeout in tasks/health.yml, checked in tasks/validate.yml). The filter passes it through.
ROLE_DEFAULTS = {"health_timeout"}


@pytest.fixture(scope="module")
def instance_spec():
    with open(SPECS) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    return options["vllm_service_instances"]


def validate(instance_spec, *instances):
    validator = ArgumentSpecValidator({"vllm_service_instances": instance_spec})
    return validator.validate({"vllm_service_instances": list(instances)}, validate_role_argument_spec=True)


def test_the_filter_fills_in_the_defaults_the_spec_documents(instance_spec):
    documented = {
        name: option.get("default")
        for name, option in instance_spec["options"].items()
        if not option.get("required") and name not in ROLE_DEFAULTS
    }
    assert documented == vllm_options.DEFAULTS


def test_the_options_the_role_fills_in_have_no_spec_default_and_pass_the_filter(instance_spec):
    for name in ROLE_DEFAULTS:
        assert "default" not in instance_spec["options"][name] and name not in vllm_options.DEFAULTS
    (passed,) = vllm_options.validate_instances([{"name": "big", "model": "m", "health_timeout": 5400}], 1)
    assert passed["health_timeout"] == 5400
    (unset,) = vllm_options.validate_instances([{"name": "small", "model": "m"}], 1)
    assert "health_timeout" not in unset


def test_the_filter_names_the_quantizations_the_spec_accepts(instance_spec):
    assert tuple(instance_spec["options"]["quantization"]["choices"]) == vllm_options.QUANTIZATIONS


def test_the_api_key_is_a_no_log_option(instance_spec):
    result = validate(instance_spec, {"name": "a", "model": "m", "api_key": "sk-canary-1"})
    assert not result.error_messages
    assert instance_spec["options"]["api_key"]["no_log"] is True
    assert "sk-canary-1" in result._no_log_values


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model": None}, "missing required arguments: model"),
        ({"block_size": 24}, "block_size must be one of: 1, 8, 16, 32, 64, 128, got: 24"),
        ({"dtype": "int4"}, "dtype must be one of: auto, half"),
        ({"quantization": "nf4"}, "quantization must be one of: awq"),
        ({"colour": "blue"}, "vllm_service_instances.colour. Supported parameters include"),
        ({"port": "http"}, "unable to convert to int"),
        ({"gpus": "all"}, "gpus"),
        ({"allow_unauthenticated": "maybe"}, "allow_unauthenticated"),
        ({"health_timeout": "soon"}, "health_timeout"),
    ],
)
def test_the_spec_refuses_what_the_filter_no_longer_checks(instance_spec, overrides, message):
    instance = {"name": "llama", "model": "/srv/models/llama"}
    instance.update(overrides)
    if overrides.get("model", "") is None:
        del instance["model"]
    errors = " | ".join(validate(instance_spec, instance).error_messages)
    assert message in errors, errors


def test_an_instance_the_spec_accepts_passes_the_filter_unchanged_in_meaning(instance_spec):
    raw = {"name": "llama", "model": "/srv/models/llama", "port": "8001", "block_size": "32"}
    result = validate(instance_spec, raw)
    assert not result.error_messages
    (from_spec,) = vllm_options.validate_instances(result.validated_parameters["vllm_service_instances"], 1)
    (from_raw,) = vllm_options.validate_instances([raw], 1)
    # The spec lists the role-filled options as None, which the role's tasks read as unset.
    assert all(from_spec.pop(name) is None for name in ROLE_DEFAULTS)
    assert from_spec == from_raw
    assert from_raw["port"] == 8001 and from_raw["serve_args"][-2:] == ["--block-size", "32"]


def test_an_open_bind_without_a_key_passes_the_spec_and_the_filter_refuses_it(instance_spec):
    # The spec cannot relate host and api_key: the filter refuses it; allow_unauthenticated (a spec bool) accepts it.
    raw = {"name": "open", "model": "m", "host": "0.0.0.0"}  # noqa: S104
    result = validate(instance_spec, raw)
    assert not result.error_messages
    with pytest.raises(vllm_options.InvalidInstance, match="allow_unauthenticated: true"):
        vllm_options.validate_instances(result.validated_parameters["vllm_service_instances"], 1)
    accepted = validate(instance_spec, dict(raw, allow_unauthenticated="yes"))
    assert not accepted.error_messages
    (served,) = vllm_options.validate_instances(accepted.validated_parameters["vllm_service_instances"], 1)
    assert served["allow_unauthenticated"] is True
