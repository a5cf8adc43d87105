"""The fixture vLLM checks a model directory as vLLM 0.11.1 does before it serves (config.json's architectures, the
safetensors headers read with the real library, the tokenizer; with HF_HUB_OFFLINE=1 nothing but a local directory),
and answers the OpenAI endpoints a real client calls: the official openai client is pointed at it here."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import openai
import pytest
from test_fixture_contracts import SOURCES, fixture_amdsmi, fixture_triton

from tests.harness import fixture_model

KEY = "test-key-models"


def model_dir(tmp_path, drop=(), change=None):
    """The fixture model as a pulled revision directory holds it (the default file patterns' selection)."""
    directory = tmp_path / "models" / "acme--tiny-llama" / ("e" * 40)
    directory.mkdir(parents=True)
    for path, data in fixture_model.files(seed=5).items():
        if path in drop or path in ("pytorch_model.bin", "README.md"):
            continue
        (directory / path).write_bytes((change or {}).get(path, data))
    return directory


def environment(tmp_path, **extra):
    amdsmi = fixture_amdsmi(tmp_path, gpus=True)
    path = os.pathsep.join([str(amdsmi), os.path.join(SOURCES, "vllm"), fixture_triton(tmp_path)])
    env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", TRITON_CACHE_DIR=str(tmp_path / "tc"))
    env.pop("HF_HUB_OFFLINE", None)
    env.update(extra)
    return env


def serve(tmp_path, model, *args, **extra):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-c", "from vllm.entrypoints.cli import main; main()", "serve", str(model)]
    return port, subprocess.Popen(
        command + ["--port", str(port), *args],
        cwd=str(tmp_path),
        env=environment(tmp_path, VLLM_API_KEY=KEY, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def refused(tmp_path, model, **extra):
    """The fixture's `vllm serve` on a model it must refuse: its exit message."""
    _port, server = serve(tmp_path, model, **extra)
    try:
        _out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode != 0
    return err


@pytest.fixture
def served(tmp_path):
    directory = model_dir(tmp_path)
    port, server = serve(tmp_path, directory, "--served-model-name", "acme/tiny-llama", HF_HUB_OFFLINE="1")
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):  # noqa: S310 - loopback
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise AssertionError(server.communicate()[1]) from None
            time.sleep(0.1)
    yield openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0), directory
    server.kill()
    server.wait()


def test_a_real_openai_client_lists_the_model_and_gets_chat_and_text_completions(served):
    client, directory = served
    (listed,) = client.models.list().data
    assert listed.id == "acme/tiny-llama" and listed.owned_by == "vllm" and listed.root == str(directory)
    chat = client.chat.completions.create(
        model="acme/tiny-llama", messages=[{"role": "user", "content": "which model answers?"}]
    )
    answer = chat.choices[0].message.content
    assert chat.object == "chat.completion" and chat.choices[0].finish_reason == "stop"
    # The answer names the model and the revision directory it would have loaded.
    assert "acme/tiny-llama would have been loaded from %s" % directory in answer
    assert answer.endswith('You said: "which model answers?"') and chat.usage.total_tokens > 0
    text = client.completions.create(model="acme/tiny-llama", prompt="Once upon a time")
    assert text.object == "text_completion" and text.choices[0].text.endswith('You said: "Once upon a time"')


def test_streamed_chat_and_text_completions_arrive_in_chunks_that_add_up(served):
    client, directory = served
    stream = client.chat.completions.create(
        model="acme/tiny-llama", messages=[{"role": "user", "content": "stream it"}], stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[-1].choices[0].finish_reason == "stop"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert len(chunks) > 5 and text.endswith('You said: "stream it"') and str(directory) in text
    pieces = list(client.completions.create(model="acme/tiny-llama", prompt="go on", stream=True))
    assert "".join(piece.choices[0].text for piece in pieces).endswith('You said: "go on"')


def test_a_wrong_model_name_or_key_is_refused_as_vllm_refuses_it(served):
    client, _directory = served
    with pytest.raises(openai.NotFoundError, match="The model `other` does not exist."):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.AuthenticationError):
        client.with_options(api_key="wrong").models.list()


def test_a_directory_without_config_json_is_refused_with_vllms_message(tmp_path):
    err = refused(tmp_path, model_dir(tmp_path, drop=("config.json",)))
    assert (
        "Invalid repository ID or local directory specified:" in err and "ensure the presence of a 'config.json'" in err
    )


def test_an_architecture_vllm_does_not_know_is_refused(tmp_path):
    config = json.loads(fixture_model.files()["config.json"])
    config["architectures"] = ["NoSuchForCausalLM"]
    err = refused(tmp_path, model_dir(tmp_path, change={"config.json": json.dumps(config).encode()}))
    assert "Model architectures ['NoSuchForCausalLM'] are not supported for now." in err


def test_a_directory_without_weights_is_refused(tmp_path):
    directory = model_dir(tmp_path, drop=("model.safetensors",))
    assert "Cannot find any model weights with `%s`" % directory in refused(tmp_path, directory)


def test_a_damaged_safetensors_header_is_refused_by_the_real_library(tmp_path):
    blob = bytearray(fixture_model.files(seed=5)["model.safetensors"])
    blob[8:16] = b"!notjson"
    err = refused(tmp_path, model_dir(tmp_path, change={"model.safetensors": bytes(blob)}))
    assert "SafetensorError" in err or "safetensors" in err.lower()


def test_a_directory_without_a_tokenizer_is_refused(tmp_path):
    err = refused(tmp_path, model_dir(tmp_path, drop=("tokenizer.json",)))
    assert "Can't load tokenizer for" in err


def test_offline_a_hub_name_is_refused_as_vllm_refuses_it(tmp_path):
    err = refused(tmp_path, "acme/tiny-llama", HF_HUB_OFFLINE="1")
    assert "Invalid repository ID or local directory specified: 'acme/tiny-llama'" in err
