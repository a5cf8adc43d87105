"""`vllm serve MODEL ...`: a small OpenAI-compatible server with vLLM's options, for service tests.

It answers GET /health, GET /v1/models and POST /v1/chat/completions (both with Bearer auth when
VLLM_API_KEY is set, 401 otherwise, as vLLM's --api-key does), and validates the options the way
vLLM does, so a unit that passes a bad value fails to start. A chat completion has the OpenAI
response shape; its content says that no model and no GPU produced it and echoes the last user
message. Like vLLM, it serves only on a detected platform (vllm.platforms, through amdsmi): on
UnspecifiedPlatform it fails with vLLM's own "Failed to infer device type" error.
"""

import argparse
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
    serve.add_argument("--max-model-len", type=int)
    serve.add_argument("--quantization")
    serve.add_argument("--served-model-name")
    return root


# What every chat completion answers: no model runs behind this server, and no GPU either.
FIXTURE_ANSWER = (
    "This answer comes from the fixture vLLM of instinct.stack's tests: no GPU and no model produced it, "
    "the server only echoes your last message. You said: %s"
)


def chat_completion(model, body):
    """The OpenAI chat.completion object for a request body: (HTTP status, response body)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return 400, {"error": {"message": "messages must be a non-empty list", "type": "BadRequestError", "code": 400}}
    if body.get("model", model) != model:
        message = "The model `%s` does not exist." % body["model"]
        return 404, {"error": {"message": message, "type": "NotFoundError", "code": 404}}
    said = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    if isinstance(said, list):  # content parts: the text ones
        said = " ".join(part.get("text", "") for part in said if isinstance(part, dict) and part.get("type") == "text")
    content = FIXTURE_ANSWER % json.dumps(said if isinstance(said, str) else "")
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    completion_tokens = len(content.split())
    return 200, {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


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
    api_key = os.environ.get("VLLM_API_KEY")
    model = args.served_model_name or args.model

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
            elif self.path == "/v1/models":
                if self._authorized():
                    self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "not found"})
            elif self._authorized():
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                self._send(*chat_completion(model, body))

        def log_message(self, fmt, *fmt_args):
            sys.stderr.write("INFO: %s %s\n" % (self.address_string(), fmt % fmt_args))

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(
        "INFO: serving %s on http://%s:%d (platform=%s, tp=%d, gpu_memory_utilization=%s, extra=%s)"
        % (
            model,
            args.host,
            args.port,
            current_platform.device_name,
            args.tensor_parallel_size,
            args.gpu_memory_utilization,
            extra,
        ),
        flush=True,
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
