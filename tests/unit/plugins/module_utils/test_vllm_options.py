import pytest

from ansible_collections.instinct.stack.plugins.module_utils.vllm_options import (
    InvalidInstance,
    hub_models,
    validate_instance,
    validate_instances,
)


def instance(**overrides):
    base = {"name": "llama", "model": "/srv/models/llama"}
    base.update(overrides)
    return base


def test_defaults_and_serve_args():
    (llama,) = validate_instances(
        [instance(max_model_len="8192", quantization="fp8", extra_args=["--enforce-eager"])], 8
    )
    assert llama["host"] == "127.0.0.1" and llama["port"] == 8000
    assert llama["serve_args"] == [
        "/srv/models/llama",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--dtype",
        "auto",
        "--gpu-memory-utilization",
        "0.9",
        "--tensor-parallel-size",
        "1",
        "--max-model-len",
        "8192",
        "--quantization",
        "fp8",
        "--enforce-eager",
    ]


def test_api_key_never_in_the_arguments():
    (llama,) = validate_instances([instance(api_key="sk-secret-123")], 1)
    assert "sk-secret-123" not in repr(llama)
    assert llama["has_api_key"] is True


@pytest.mark.parametrize("value", [0, -0.1, 1.01, "1.5", "abc", None])
def test_gpu_memory_utilization_outside_zero_one(value):
    with pytest.raises(InvalidInstance, match="gpu_memory_utilization"):
        validate_instance(instance(gpu_memory_utilization=value), 8)


@pytest.mark.parametrize("value", [1, "0.5", 0.01])
def test_gpu_memory_utilization_accepted(value):
    assert 0 < validate_instance(instance(gpu_memory_utilization=value), 8)["gpu_memory_utilization"] <= 1


def test_tensor_parallel_bounded_by_gpus():
    assert validate_instance(instance(tensor_parallel_size=8), 8)["tensor_parallel_size"] == 8
    with pytest.raises(InvalidInstance, match="tensor_parallel_size must be between 1 and 8, got 16"):
        validate_instance(instance(tensor_parallel_size=16), 8)
    with pytest.raises(InvalidInstance, match="between 1 and 2"):
        validate_instance(instance(gpus=[0, 1], tensor_parallel_size=4), 8)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"name": "Bad Name"}, "lower-case"),
        ({"port": 70000}, "port must be between 1 and 65535"),
        ({"port": "http"}, "port must be an integer"),
        ({"gpus": [8]}, "GPUs the host does not have"),
        ({"extra_args": ["--api-key=x"]}, "extra_args may not set --api-key"),
    ],
)
def test_bad_values_name_instance_and_option(overrides, message):
    with pytest.raises(InvalidInstance, match=message):
        validate_instance(instance(**overrides), 8)


def test_duplicate_ports_and_names():
    with pytest.raises(InvalidInstance, match="share a port: 8000"):
        validate_instances([instance(name="a"), instance(name="b")], 8)
    with pytest.raises(InvalidInstance, match="share a name: a"):
        validate_instances([instance(name="a", port=1), instance(name="a", port=2)], 8)


def test_hip_visible_devices_hide_the_gpus_left_out_of_compute():
    from ansible_collections.instinct.stack.plugins.module_utils.vllm_options import hip_visible_devices

    # An MI210 pair with a Ryzen iGPU between them in KFD order: HIP indices 0 and 2.
    assert hip_visible_devices([], "0,2") == "0,2"
    assert hip_visible_devices([1], "0,2") == "2"
    assert hip_visible_devices([1], [0, 2]) == "2"
    # Every GPU HIP sees is a compute GPU: nothing to hide, unless the instance picks its GPUs.
    assert hip_visible_devices([], "0,1,2,3") == ""
    assert hip_visible_devices([], "") == "" and hip_visible_devices([], None) == ""
    assert hip_visible_devices([2, 3], "") == "2,3"


def test_validated_instances_carry_their_hip_visible_devices():
    (first, second) = validate_instances(
        [instance(name="a", port=8000, gpus=[0]), instance(name="b", port=8001, gpus=[1])], 2, "1,3"
    )
    assert (first["hip_visible_devices"], second["hip_visible_devices"]) == ("1", "3")


def test_block_size_passed_only_when_set():
    # vLLM picks the block size per attention backend (ROCm's sparse MLA needs 1): no default is forced on it.
    (unset,) = validate_instances([instance()], 1)
    assert unset["block_size"] is None and "--block-size" not in unset["serve_args"]
    (chosen,) = validate_instances([instance(block_size="32")], 1)
    assert chosen["serve_args"][-2:] == ["--block-size", "32"]


@pytest.mark.parametrize(
    "quantization, archs, gpus, refused",
    [
        # vllm/platforms/rocm.py: bitsandbytes only off gfx9; the fp8 methods need fp8 hardware (supports_fp8).
        ("bitsandbytes", ["gfx942"] * 8, [], "gfx942"),
        ("bitsandbytes", ["gfx1100"], [], None),
        ("fp8", ["gfx90a", "gfx90a"], [], "gfx90a"),
        ("ptpc_fp8", ["gfx90a"], [], "gfx90a"),
        ("fp8", ["gfx942"], [], None),
        ("fp8", ["gfx950"], [], None),
        ("fbgemm_fp8", ["gfx1201"], [], None),
        # Only the GPUs the instance uses count: an MI300X instance on a host that also holds an MI210.
        ("fp8", ["gfx90a", "gfx942"], [1], None),
        ("fp8", ["gfx90a", "gfx942"], [0], "gfx90a"),
        ("awq", ["gfx90a"], [], None),
        ("mxfp4", ["gfx90a"], [], None),
    ],
)
def test_quantization_follows_the_rocm_platform_per_arch(quantization, archs, gpus, refused):
    request = instance(quantization=quantization, gpus=gpus)
    if refused:
        with pytest.raises(InvalidInstance, match="quantization %r needs .* its GPUs are %s" % (quantization, refused)):
            validate_instance(request, len(archs), archs)
    else:
        assert validate_instance(request, len(archs), archs)["quantization"] == quantization


def test_quantization_refusal_lists_what_the_gpus_take():
    with pytest.raises(InvalidInstance) as error:
        validate_instance(instance(quantization="fp8"), 1, ["gfx90a"])
    assert "awq" in str(error.value) and "fp8," not in str(error.value) and "bitsandbytes" not in str(error.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "127.255.255.254", "::1", "localhost", "LocalHost."])
def test_loopback_without_an_api_key_is_accepted(host):
    (served,) = validate_instances([instance(host=host)], 1)
    assert served["has_api_key"] is False and served["allow_unauthenticated"] is False
    assert served["serve_args"][1:3] == ["--host", host]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.20", "fd00::1", "gpu1.example", ""])  # noqa: S104
def test_beyond_loopback_without_an_api_key_is_refused(host):
    with pytest.raises(InvalidInstance, match="is not a loopback address and the instance has no api_key"):
        validate_instances([instance(host=host)], 1)


def test_the_refusal_says_what_to_set():
    with pytest.raises(InvalidInstance) as error:
        validate_instance(instance(host="0.0.0.0", port=8001), 1)  # noqa: S104
    assert str(error.value) == (
        "vLLM instance 'llama': host 0.0.0.0 is not a loopback address and the instance has no api_key, so anyone "
        "who reaches port 8001 could use the model; set api_key (from an ansible-vault file), bind host to "
        "127.0.0.1, or set allow_unauthenticated: true to accept a service without authentication"
    )


@pytest.mark.parametrize("key", ["", "   ", None])
def test_an_empty_api_key_is_no_key(key):
    with pytest.raises(InvalidInstance, match="has no api_key"):
        validate_instance(instance(host="0.0.0.0", api_key=key), 1)  # noqa: S104


def test_beyond_loopback_with_an_api_key_is_accepted():
    (served,) = validate_instances([instance(host="0.0.0.0", api_key="sk-secret-123")], 1)  # noqa: S104
    assert served["has_api_key"] is True and "sk-secret-123" not in repr(served)


@pytest.mark.parametrize("allow", [True, "true", "yes"])
def test_beyond_loopback_accepted_when_the_user_allows_it(allow):
    (served,) = validate_instances([instance(host="::", allow_unauthenticated=allow)], 1)
    assert served["allow_unauthenticated"] is True and served["has_api_key"] is False


@pytest.mark.parametrize("allow", [False, "false", "no"])
def test_allow_unauthenticated_false_still_refuses(allow):
    with pytest.raises(InvalidInstance, match="set allow_unauthenticated: true"):
        validate_instance(instance(host="10.0.0.5", allow_unauthenticated=allow), 1)


def test_allow_unauthenticated_must_be_a_boolean():
    with pytest.raises(InvalidInstance, match="allow_unauthenticated must be true or false, got 'maybe'"):
        validate_instance(instance(host="10.0.0.5", allow_unauthenticated="maybe"), 1)


def test_ipv4_mapped_loopback_is_loopback():
    from ansible_collections.instinct.stack.plugins.module_utils.vllm_options import is_loopback

    assert is_loopback("::ffff:127.0.0.1") and not is_loopback("::ffff:10.0.0.1")


HUB = {"repo": "meta-llama/Llama-3.1-8B-Instruct", "revision": "0e9e39f249a16976918f6564b8830bc894c89659"}


def test_a_hub_model_is_served_through_its_link_under_the_repositorys_name():
    (llama,) = validate_instances([instance(model=dict(HUB))], 8, model_root="/var/lib/instinct-stack/models")
    assert llama["model_key"] == "meta-llama/Llama-3.1-8B-Instruct@" + HUB["revision"]
    assert llama["model_path"] == "/var/lib/instinct-stack/models/served/llama"
    assert llama["serve_args"][0] == "/var/lib/instinct-stack/models/served/llama"
    assert llama["serve_args"][-2:] == ["--served-model-name", "meta-llama/Llama-3.1-8B-Instruct"]
    # The defaults of the file selection are filled in: no duplicate .bin or .pth weights.
    assert "*.safetensors" in llama["model"]["files"] and not any(".bin" in p for p in llama["model"]["files"])
    (named,) = validate_instances([instance(model=dict(HUB), served_model_name="llama")], 8, model_root="/m")
    assert named["serve_args"][-2:] == ["--served-model-name", "llama"]


def test_a_path_model_is_served_as_given():
    (llama,) = validate_instances([instance()], 8, model_root="/m")
    assert llama["model_key"] is None and llama["serve_args"][0] == "/srv/models/llama"
    assert "--served-model-name" not in llama["serve_args"]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"repo": "meta-llama/Llama-3.1-8B-Instruct"}, "has no revision"),
        ({"repo": "not a repo", "revision": "main"}, "not a repo"),
        (dict(HUB, files="*.safetensors"), "files must be a list"),
        (dict(HUB, branch="main"), "unknown model option(s) branch"),
        ("", "model must be a model directory"),
        (None, "model must be a model directory"),
    ],
)
def test_a_bad_model_is_refused_naming_the_instance(model, message):
    with pytest.raises(InvalidInstance) as refused:
        validate_instances([instance(model=model)], 8, model_root="/m")
    assert str(refused.value).startswith("vLLM instance 'llama': ") and message in str(refused.value)


def test_hub_models_lists_each_revision_once_and_refuses_two_selections():
    other = instance(name="other", port=8001, model=dict(HUB))
    found = hub_models([instance(model=dict(HUB)), other, instance(name="path", port=8002)])
    assert [spec["key"] for spec in found] == ["meta-llama/Llama-3.1-8B-Instruct@" + HUB["revision"]]
    with pytest.raises(InvalidInstance) as refused:
        hub_models([instance(model=dict(HUB)), dict(other, model=dict(HUB, files=["*.json"]))])
    assert "vLLM instance 'other'" in str(refused.value) and "with one selection" in str(refused.value)


GROUP = instance(nodes=["gpu1", "gpu2"], pipeline_parallel_size=2, tensor_parallel_size=8)


def test_a_serving_group_serves_with_the_ray_backend_across_its_nodes():
    (head,) = validate_instances([GROUP], 8, node="gpu1")
    assert head["group_role"] == "head"
    assert head["units"] == ["vllm-llama-ray.service", "vllm-llama.service"]
    args = head["serve_args"]
    assert args[args.index("--pipeline-parallel-size") + 1] == "2"
    assert args[args.index("--distributed-executor-backend") + 1] == "ray"
    (worker,) = validate_instances([GROUP], 8, node="gpu2")
    assert worker["group_role"] == "worker" and worker["units"] == ["vllm-llama-ray.service"]


def test_an_instance_on_one_host_runs_one_unit_and_no_ray():
    (single,) = validate_instances([instance()], 1, node="gpu1")
    assert single["group_role"] is None and single["units"] == ["vllm-llama.service"]
    assert "--distributed-executor-backend" not in single["serve_args"]


def test_a_group_given_to_a_host_that_is_not_its_node_is_refused():
    with pytest.raises(InvalidInstance, match=r"this host \(gpu3\) is none of its nodes"):
        validate_instances([GROUP], 8, node="gpu3")


def test_a_host_is_a_node_of_one_group_at_most():
    other = dict(GROUP, name="mixtral", port=8001)
    with pytest.raises(InvalidInstance, match="serving groups on one host"):
        validate_instances([GROUP, other], 8, node="gpu1")


def test_a_group_shape_that_does_not_match_is_refused_naming_the_instance():
    with pytest.raises(InvalidInstance, match="'llama': pipeline_parallel_size is 3 but nodes names 2"):
        validate_instances([dict(GROUP, pipeline_parallel_size=3)], 8, node="gpu1")


@pytest.mark.parametrize("arg", ["--pipeline-parallel-size=2", "--distributed-executor-backend"])
def test_the_group_options_are_not_extra_args(arg):
    with pytest.raises(InvalidInstance, match="extra_args may not set"):
        validate_instances([instance(extra_args=[arg])], 1)
