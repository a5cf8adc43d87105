"""`vllm serve MODEL ...`: a small OpenAI-compatible server with vLLM's options, for service tests.

It answers GET /health, GET /version, GET /v1/models, POST /v1/chat/completions and POST /v1/completions (the
last three with Bearer auth when VLLM_API_KEY is set, 401 otherwise, as vLLM's --api-key does), with and without
streaming (server-sent events ending in `data: [DONE]`), in the shapes of vLLM 0.11.1's
vllm/entrypoints/openai/protocol.py, and validates the options the way vLLM does, so a unit that passes a bad value
fails to start. A completion's content says that no model and no GPU produced it, names the model directory it
would have loaded (the revision's directory, for a pulled model) and echoes the last user message or the prompt.
Like vLLM, it serves only on a detected platform (vllm.platforms, through amdsmi): on UnspecifiedPlatform it fails
with vLLM's own "Failed to infer device type" error. Before it serves, it checks a local model directory as vLLM
does (check_model): config.json and its architectures, the safetensors weights (headers read with the safetensors
library) and the tokenizer; with HF_HUB_OFFLINE=1 a model that is not a local directory fails as vLLM's does.
"""

import argparse
import glob
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def fraction(value):
    number = float(value)
    if not 0 < number <= 1:
        raise argparse.ArgumentTypeError("must be in (0, 1], got %s" % value)
    return number


def parser():
    root = argparse.ArgumentParser(prog="vllm")
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    serve.add_argument("--gpu-memory-utilization", type=fraction, default=0.9)
    serve.add_argument(
        "--block-size", type=int, choices=[1, 8, 16, 32, 64, 128], default=None
    )  # vllm/config/cache.py: None, the backend decides
    serve.add_argument("--tensor-parallel-size", type=int, default=1)
    serve.add_argument("--pipeline-parallel-size", type=int, default=1)
    serve.add_argument("--distributed-executor-backend", choices=["ray", "mp", "uni", "external_launcher"])
    serve.add_argument("--max-model-len", type=int)
    serve.add_argument("--quantization")
    serve.add_argument("--served-model-name")
    return root


# What every completion answers: no model runs behind this server, and no GPU either.
FIXTURE_ANSWER = (
    "This answer comes from the fixture vLLM of instinct.stack's tests: no GPU and no model produced it; "
    "%s would have been loaded from %s. The server only echoes your last message. You said: %s"
)
# vLLM 0.11.1's messages (vllm/transformers_utils/config.py, vllm/model_executor/models/registry.py,
# vllm/model_executor/model_loader/default_loader.py).
INVALID_MODEL = (
    "ValueError: Invalid repository ID or local directory specified: '%s'.\nPlease verify the following requirements:\n"
    "1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory that contains a recognized "
    "configuration file.\n   - For Hugging Face models: ensure the presence of a 'config.json'.\n   - For Mistral "
    "models: ensure the presence of a 'params.json'."
)
NO_ARCHITECTURES = "ValueError: No model architectures are specified"
UNSUPPORTED = "ValueError: Model architectures %s are not supported for now. Supported architectures: %s"
NO_WEIGHTS = "RuntimeError: Cannot find any model weights with `%s`"
# A few of the text-generation architectures vLLM 0.11.1's registry holds (vllm/model_executor/models/registry.py).
ARCHITECTURES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "DeepseekV3ForCausalLM",
    "GptOssForCausalLM",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json")


def loaded_from(model):
    """The model directory a link names too (instinct.stack serves a Hub model through a link to its revision), so
    the answer says which revision would have been loaded."""
    real = os.path.realpath(model)
    return model if real == model or not os.path.isdir(model) else "%s (%s)" % (model, real)


def check_model(model):
    """What vLLM checks of MODEL before it serves it, with its messages: SystemExit(message) on a fault, else a
    summary of a local directory (None for a Hub name, which vLLM would download)."""
    if not os.path.isdir(model):
        if os.environ.get("HF_HUB_OFFLINE") == "1":
            sys.exit(INVALID_MODEL % model)
        return None
    config_path = os.path.join(model, "config.json")
    if not os.path.isfile(config_path):
        sys.exit(INVALID_MODEL % model)
    with open(config_path) as handle:
        architectures = json.load(handle).get("architectures") or []
    if not architectures:
        sys.exit(NO_ARCHITECTURES)
    if not any(name in ARCHITECTURES for name in architectures):
        sys.exit(UNSUPPORTED % (architectures, sorted(ARCHITECTURES)))
    weights = sorted(glob.glob(os.path.join(model, "*.safetensors")))
    index = os.path.join(model, "model.safetensors.index.json")
    if os.path.isfile(index):  # only the files its weight_map names (weight_utils.filter_duplicate_safetensors_files)
        with open(index) as handle:
            mapped = set(json.load(handle).get("weight_map", {}).values())
        weights = [path for path in weights if os.path.basename(path) in mapped]
    if not weights:
        sys.exit(NO_WEIGHTS % model)
    from safetensors import safe_open  # the real library reads each header, as vLLM's loader does

    tensors = 0
    for path in weights:
        with safe_open(path, framework="np") as handle:
            tensors += len(list(handle.keys()))
    if not any(os.path.isfile(os.path.join(model, name)) for name in TOKENIZER_FILES):
        # transformers' AutoTokenizer.from_pretrained, which vLLM's get_tokenizer calls, fails on such a directory.
        sys.exit("OSError: Can't load tokenizer for '%s'." % model)
    return {"architectures": architectures, "weights": len(weights), "tensors": tensors}


def user_text(content):
    if isinstance(content, list):  # content parts: the text ones
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def error(status, kind, message):
    return status, {"error": {"message": message, "type": kind, "param": None, "code": status}}


def completion(served, root, body, chat, stages=""):
    """(HTTP status, the response object, the answer's text) of a chat or text completion request."""
    if not isinstance(body, dict):
        return error(400, "BadRequestError", "the request body must be a JSON object") + (None,)
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return error(400, "BadRequestError", "messages must be a non-empty list") + (None,)
        said = user_text(next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), ""))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    else:
        said = body.get("prompt")
        if not isinstance(said, str) or not said:
            return error(400, "BadRequestError", "prompt must be a non-empty string") + (None,)
        prompt_tokens = len(said.split())
    if body.get("model", served) != served:
        return error(404, "NotFoundError", "The model `%s` does not exist." % body["model"]) + (None,)
    text = FIXTURE_ANSWER % (served, root, json.dumps(said)) + stages
    completion_tokens = len(text.split())
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": None,
    }
    created = int(time.time())
    if chat:
        choice = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "tool_calls": [],
                "reasoning_content": None,
            },
            "logprobs": None,
            "finish_reason": "stop",
            "stop_reason": None,
        }
        kind, prefix = "chat.completion", "chatcmpl-"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop", "stop_reason": None}
        kind, prefix = "text_completion", "cmpl-"
    answer = {"id": prefix + uuid.uuid4().hex, "object": kind, "created": created, "model": served}
    answer.update(choices=[choice], usage=usage, system_fingerprint=None)
    return 200, answer, text


def stream_chunks(answer, text, chat):
    """The server-sent events of a streamed answer, as vLLM's serving_chat.py and serving_completion.py send them:
    the role first (chat), the text in pieces, the finish reason, then [DONE]."""
    base = {"id": answer["id"], "created": answer["created"], "model": answer["model"]}
    kind = "chat.completion.chunk" if chat else "text_completion"
    pieces = [word + " " for word in text.split(" ")]
    pieces[-1] = pieces[-1].rstrip(" ")
    events = []
    if chat:
        events.append(dict(base, object=kind, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}]))
    for piece in pieces:
        delta = {"delta": {"content": piece}} if chat else {"text": piece}
        events.append(
            dict(base, object=kind, choices=[dict({"index": 0, "logprobs": None, "finish_reason": None}, **delta)])
        )
    last = {"delta": {}} if chat else {"text": ""}
    events.append(
        dict(base, object=kind, choices=[dict({"index": 0, "finish_reason": "stop", "stop_reason": None}, **last)])
    )
    return ["data: %s\n\n" % json.dumps(event) for event in events] + ["data: [DONE]\n\n"]


# vLLM's error when its engine core process fails to start (vllm/v1/engine/core_client.py), for instance when the
# build cannot load the model: the server never answers /health and exits.
ENGINE_CORE_ERROR = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"

INFER_DEVICE_ERROR = (
    "RuntimeError: Failed to infer device type, please set the environment variable "
    "`VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help debug the issue."
)


def main(argv=None):
    args, extra = parser().parse_known_args(argv)
    logging.basicConfig(level=os.environ.get("VLLM_LOGGING_LEVEL", "INFO"), format="%(levelname)s %(message)s")
    from vllm.platforms import current_platform

    if not current_platform.device_name:
        sys.exit(INFER_DEVICE_ERROR)
    # Fault injection for the cluster scenario: FIXTURE_VLLM_LOADS_ONLY_ON=STACK_DIR stands for a model that the stack
    # in that directory serves and a newer vLLM build cannot load; from any other stack the server exits as vLLM does.
    loads_only_on = os.environ.get("FIXTURE_VLLM_LOADS_ONLY_ON")
    if loads_only_on and not (os.path.realpath(sys.prefix) + "/").startswith(os.path.realpath(loads_only_on) + "/"):
        logging.error("the model does not load on the stack in %s (FIXTURE_VLLM_LOADS_ONLY_ON)", sys.prefix)
        sys.exit(ENGINE_CORE_ERROR)
    # The engine runs its first kernels (the profile run) before the server answers /health, and Triton compiles its
    # launcher there (triton/runtime/build.py): a host without a C compiler or the Python headers fails here.
    from triton.runtime.build import compile_launcher

    try:
        launcher = compile_launcher()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        logging.error("Triton could not compile its launcher: %s", error)
        sys.exit(ENGINE_CORE_ERROR)
    logging.info("Triton launcher: %s", launcher)
    checked = check_model(args.model)
    if checked:
        logging.info("model %s: %s", args.model, checked)
    stages = ""
    if args.distributed_executor_backend == "ray":
        # More than one node: the engine's workers are Ray actors placed across the cluster (vllm/executor).
        from vllm.executor import ray_utils

        try:
            placed = ray_utils.start_workers(
                current_platform, args.model, args.tensor_parallel_size, args.pipeline_parallel_size
            )
        except (RuntimeError, ValueError) as error:
            logging.error("%s", error)
            sys.exit(ENGINE_CORE_ERROR)
        ray_utils.watch_workers(placed)
        by_stage = {}
        for _rank, stage, _worker, view in placed:
            by_stage.setdefault(stage, set()).add(view["ip"])
        stages = " Pipeline stages: %s." % ", ".join(
            "%d on %s" % (stage, " and ".join(sorted(ips))) for stage, ips in sorted(by_stage.items())
        )
    api_key = os.environ.get("VLLM_API_KEY")
    model = args.served_model_name or args.model
    created = int(time.time())
    listed = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": args.model,
        "parent": None,
        "max_model_len": args.max_model_len or 2048,
        "permission": [
            {"id": "modelperm-" + uuid.uuid4().hex, "object": "model_permission", "created": created,
             "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
             "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False, "organization": "*",
             "group": None, "is_blocking": False}
        ],
    }  # fmt: skip

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self):
            if api_key and self.headers.get("Authorization") != "Bearer " + api_key:
                self._send(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/version":
                self._send(200, {"version": "0.11.1"})
            elif self.path == "/v1/models":
                if self._authorized():
                    self._send(200, {"object": "list", "data": [listed]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path not in ("/v1/chat/completions", "/v1/completions"):
                self._send(404, {"error": "not found"})
                return
            if not self._authorized():
                return
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            chat = self.path == "/v1/chat/completions"
            status, answer, text = completion(model, loaded_from(args.model), body, chat, stages)
            if status != 200 or not body.get("stream"):
                self._send(status, answer)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in stream_chunks(answer, text, chat):
                self.wfile.write(event.encode())
                self.wfile.flush()
            self.close_connection = True

        def log_message(self, fmt, *fmt_args):
            sys.stderr.write("INFO: %s %s\n" % (self.address_string(), fmt % fmt_args))

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(
        "INFO: serving %s on http://%s:%d (platform=%s, tp=%d, pp=%d, gpu_memory_utilization=%s, extra=%s)%s"
        % (
            model,
            args.host,
            args.port,
            current_platform.device_name,
            args.tensor_parallel_size,
            args.pipeline_parallel_size,
            args.gpu_memory_utilization,
            extra,
            stages,
        ),
        flush=True,
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
