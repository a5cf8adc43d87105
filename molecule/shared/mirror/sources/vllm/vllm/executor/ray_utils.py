"""vLLM's Ray executor, as `vllm serve --distributed-executor-backend ray` starts it, with the real Ray around workers
that load no model.

What vllm/executor/ray_utils.py (initialize_ray_cluster, _wait_until_pg_ready, _verify_bundles) and
vllm/executor/ray_distributed_executor.py (_init_workers_ray) of vLLM 0.11 do, with their messages: on ROCm join the
running cluster (ray.init("auto"); a new local instance when there is none), ask for a placement group of
tensor_parallel_size x pipeline_parallel_size bundles of one GPU each, packed, with the first bundle on this node,
wait up to PG_WAIT_TIMEOUT for it, and start one worker actor per bundle; the workers' nodes must have distinct IP
addresses. Ranks go to the driver's node first, then by address; pipeline stage = rank // tensor_parallel_size.

A worker checks its node as vLLM's does before it loads the model: the platform (amdsmi), the model directory, and
the fixture's FIXTURE_VLLM_LOADS_ONLY_ON fault. The engine watches its workers: when one dies (its node's Ray stopped),
it fails as vLLM's engine does, naming the stage and the node.
"""

import logging
import os
import socket
import sys
import threading
import time

logger = logging.getLogger("vllm.executor.ray_utils")

PG_WAIT_TIMEOUT = 1800
# vLLM's error when the engine core dies (vllm/v1/engine/exceptions.py).
ENGINE_DEAD = "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."


def get_ip():
    """vllm/utils get_ip: VLLM_HOST_IP, else the address of the route out."""
    host_ip = os.environ.get("VLLM_HOST_IP")
    if host_ip:
        return host_ip
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("8.8.8.8", 80))
            return probe.getsockname()[0]
        except OSError:
            pass
    logger.warning(
        "Failed to get the IP address, using 0.0.0.0 by default. The value can be set by the environment variable "
        "VLLM_HOST_IP or HOST_IP."
    )
    return "0.0.0.0"  # noqa: S104 - vLLM's own fallback, an address nothing binds here


class Worker:
    """Stands for vLLM's RayWorkerWrapper: one per GPU bundle, on the node Ray places it."""

    def __init__(self, rank):
        self.rank = rank

    def load_model(self, model):
        """The worker's part of the engine's start on its node; the node's view: its address, Ray node and GPUs."""
        import ray

        from vllm.entrypoints.cli import INFER_DEVICE_ERROR, check_model
        from vllm.platforms import current_platform

        if not current_platform.device_name:
            raise RuntimeError(INFER_DEVICE_ERROR)
        loads_only_on = os.environ.get("FIXTURE_VLLM_LOADS_ONLY_ON")
        if loads_only_on and not (os.path.realpath(sys.prefix) + "/").startswith(os.path.realpath(loads_only_on) + "/"):
            raise RuntimeError("the model does not load on the stack in %s (FIXTURE_VLLM_LOADS_ONLY_ON)" % sys.prefix)
        try:
            check_model(model)
        except SystemExit as exc:  # check_model exits with vLLM's message, as the server does
            raise RuntimeError(str(exc)) from None
        context = ray.get_runtime_context()
        return {
            "ip": get_ip(),
            "node_id": context.get_node_id(),
            "gpu_ids": [str(gpu) for gpu in context.get_accelerator_ids().get("GPU", [])],
            "stack": sys.prefix,
        }

    def ping(self):
        return True


def _wait_until_pg_ready(ray, placement_group):
    specs = placement_group.bundle_specs
    started = time.time()
    ready_ref = placement_group.ready()
    interval = 10
    while time.time() - started < PG_WAIT_TIMEOUT:
        ready, _pending = ray.wait([ready_ref], timeout=interval)
        if ready:
            return
        interval *= 2
        logger.info(
            "Waiting for creating a placement group of specs for %d seconds. specs=%s. Check `ray status` and "
            "`ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster "
            "are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a "
            "multi-node.",
            int(time.time() - started),
            specs,
        )
    raise ValueError(
        "Cannot provide a placement group of placement_group_specs=%s within %d seconds. See `ray status` and "
        "`ray list nodes` to make sure the cluster has enough resources." % (specs, PG_WAIT_TIMEOUT)
    )


def initialize_ray_cluster(platform, world_size):
    """Join the cluster and return the placement group of world_size GPU bundles."""
    import ray
    from ray._private.state import available_resources_per_node

    if ray.is_initialized():
        logger.info("Ray is already initialized. Skipping Ray initialization.")
    elif platform.is_rocm():
        try:
            ray.init("auto")
        except ConnectionError:
            logger.warning(
                "No existing RAY instance detected. A new instance will be launched with current node resources."
            )
            ray.init(address=None, num_gpus=world_size)
    device = platform.ray_device_key
    if world_size > ray.cluster_resources().get(device, 0):
        logger.warning(
            "The number of required %ss exceeds the total number of available %ss in the placement group.",
            device,
            device,
        )
    specs = [{device: 1.0} for _bundle in range(world_size)]
    current_ip = get_ip()
    node_id = ray.get_runtime_context().get_node_id()
    resources = available_resources_per_node()[node_id]
    if resources.get(device, 0) < 1:
        raise ValueError(
            "Current node has no %s available. current_node_resource=%s. vLLM engine cannot start without %s. Make "
            "sure you have at least 1 %s available in a node current_node_id=%r current_ip=%r."
            % (device, resources, device, device, node_id, current_ip)
        )
    specs[0]["node:%s" % current_ip] = 0.001
    placement_group = ray.util.placement_group(specs, strategy="PACK")
    _wait_until_pg_ready(ray, placement_group)
    table = ray.util.placement_group_table(placement_group)
    if node_id not in table["bundles_to_node_id"].values():
        raise RuntimeError(
            "driver node id %s is not included in a placement group %s. You don't have enough GPUs available in a "
            "current node." % (node_id, placement_group.id)
        )
    return placement_group


def start_workers(platform, model, tensor_parallel_size, pipeline_parallel_size):
    """The engine's workers, one per bundle: [(rank, stage, worker, its node's view)], ranks as vLLM gives them."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    world_size = tensor_parallel_size * pipeline_parallel_size
    placement_group = initialize_ray_cluster(platform, world_size)
    remote = ray.remote(num_cpus=0, num_gpus=1)(Worker)  # as vLLM creates its RayWorkerWrapper actors
    workers = [
        remote.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=placement_group,
                placement_group_capture_child_tasks=True,
                placement_group_bundle_index=index,
            )
        ).remote(index)
        for index in range(world_size)
    ]
    views = []
    for index, worker in enumerate(workers):
        try:
            views.append(ray.get(worker.load_model.remote(model)))
        except Exception as exc:  # a RayTaskError or an actor that died: what the worker said, with its node
            node_id = ray.util.placement_group_table(placement_group)["bundles_to_node_id"].get(index)
            where = [node["NodeManagerAddress"] for node in ray.nodes() if node["NodeID"] == node_id] or ["?"]
            logger.error("worker %d on node %s failed to start: %s", index, where[0], exc)
            raise RuntimeError(
                "Engine core initialization failed. See root cause above. Failed core proc(s): {}"
            ) from None
    driver_ip = get_ip()
    nodes = {}
    for view in views:
        nodes.setdefault(view["node_id"], set()).add(view["ip"])
    addresses = set(view["ip"] for view in views) | {driver_ip}
    if len(nodes) != len(addresses):
        raise RuntimeError(
            "Every node should have a unique IP address. Got %d nodes with node ids %s and %d unique IP addresses %s. "
            "Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it is "
            "unique for each node." % (len(nodes), sorted(nodes), len(addresses), sorted(addresses))
        )
    order = sorted(range(world_size), key=lambda index: (views[index]["ip"] != driver_ip, views[index]["ip"], index))
    placed = []
    for rank, index in enumerate(order):
        placed.append((rank, rank // tensor_parallel_size, workers[index], views[index]))
    for stage in range(pipeline_parallel_size):
        members = [entry for entry in placed if entry[1] == stage]
        logger.info(
            "pipeline stage %d: ranks %s on node %s (Ray node %s, GPU ids %s)",
            stage,
            [entry[0] for entry in members],
            ", ".join(sorted(set(entry[3]["ip"] for entry in members))),
            ", ".join(sorted(set(entry[3]["node_id"][:12] for entry in members))),
            [gpu for entry in members for gpu in entry[3]["gpu_ids"]],
        )
    return placed


def watch_workers(placed, interval=2.0):
    """Fail as vLLM's engine does when a worker dies: name its stage and node, then exit (the unit restarts it)."""
    import ray

    def watch():
        while True:
            time.sleep(interval)
            for rank, stage, worker, view in placed:
                try:
                    ray.get(worker.ping.remote(), timeout=30)
                except Exception as exc:
                    logger.error(
                        "the worker of pipeline stage %d (rank %d) on node %s (Ray node %s) is gone: %s",
                        stage,
                        rank,
                        view["ip"],
                        view["node_id"][:12],
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    )
                    logger.error(ENGINE_DEAD)
                    sys.stderr.flush()
                    os._exit(1)

    thread = threading.Thread(target=watch, name="ray-worker-watch", daemon=True)
    thread.start()
    return thread
