from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import mirror_path, mirror_url


def test_mirror_path_keeps_host_and_path_drops_port():
    assert mirror_path("https://github.com/pytorch/pytorch.git") == "git/github.com/pytorch/pytorch.git"
    assert mirror_path("https://github.com/ROCm/triton") == "git/github.com/ROCm/triton.git"
    assert mirror_path("http://127.0.0.1:8080/git/vllm.git") == "git/127.0.0.1/git/vllm.git"


def test_mirror_url():
    upstream = "https://github.com/vllm-project/vllm.git"
    assert mirror_url(upstream, "") == upstream
    assert mirror_url(upstream, "http://10.0.2.100/") == "http://10.0.2.100/git/github.com/vllm-project/vllm.git"
