"""`vllm serve MODEL ...`: a small OpenAI-compatible server with vLLM's options, for service tests.

It answers GET /health and GET /v1/models (with Bearer auth when VLLM_API_KEY is set), and
validates the options the way vLLM does, so a unit that passes a bad value fails to start. Like
vLLM, it serves only on a detected platform (vllm.platforms, through amdsmi): on UnspecifiedPlatform
it fails with vLLM's own "Failed to infer device type" error.
"""

import argparse
import json
import logging
import os
import sys
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

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                if api_key and self.headers.get("Authorization") != "Bearer " + api_key:
                    self._send(401, {"error": "Unauthorized"})
                else:
                    self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]})
            else:
                self._send(404, {"error": "not found"})

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
