from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import mirror_path, mirror_url


def test_mirror_path_keeps_host_and_path_drops_port():
    assert mirror_path("https://github.com/pytorch/pytorch.git") == "git/github.com/pytorch/pytorch.git"
    assert mirror_path("https://github.com/ROCm/triton") == "git/github.com/ROCm/triton.git"
    assert mirror_path("http://127.0.0.1:8080/git/vllm.git") == "git/127.0.0.1/git/vllm.git"


def test_mirror_url():
    upstream = "https://github.com/vllm-project/vllm.git"
    assert mirror_url(upstream, "") == upstream
    assert mirror_url(upstream, "http://10.0.2.100/") == "http://10.0.2.100/git/github.com/vllm-project/vllm.git"


def test_git_mirror_rewrites_send_absolute_submodule_urls_to_the_mirror():
    from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import git_mirror_rewrites

    rewrites = git_mirror_rewrites(["github.com", "gitlab.com"], "http://10.0.2.100/")
    assert rewrites == {
        "https://github.com/": "http://10.0.2.100/git/github.com/",
        "https://gitlab.com/": "http://10.0.2.100/git/gitlab.com/",
    }
    # The rewritten URL of a submodule is where mirror build stored it.
    submodule = "https://github.com/pytorch/cpuinfo.git"
    rewritten = rewrites["https://github.com/"] + submodule[len("https://github.com/") :]
    assert rewritten == mirror_url(submodule, "http://10.0.2.100")
    assert git_mirror_rewrites(["github.com"], "") == {}


def test_git_config_env_numbers_each_rule():
    from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import git_config_env

    env = git_config_env(
        {"https://gitlab.com/": "http://m/git/gitlab.com/", "https://github.com/": "http://m/git/github.com/"}
    )
    assert env == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "url.http://m/git/github.com/.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/",
        "GIT_CONFIG_KEY_1": "url.http://m/git/gitlab.com/.insteadOf",
        "GIT_CONFIG_VALUE_1": "https://gitlab.com/",
    }
    assert git_config_env({}) == {} and git_config_env(None) == {}


def test_git_follows_the_rewrites_from_the_environment(tmp_path):
    # Real git: a clone of an https://github.com/ URL lands on the local "mirror" through the environment alone.
    import os
    import subprocess

    from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import git_config_env

    mirror = tmp_path / "mirror" / "git" / "github.com" / "pytorch"
    mirror.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(mirror / "fixture-lib.git")], check=True)
    env = dict(os.environ, **git_config_env({"https://github.com/": "file://%s/mirror/git/github.com/" % tmp_path}))
    result = subprocess.run(
        ["git", "ls-remote", "https://github.com/pytorch/fixture-lib.git"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_mirror_file_url_keeps_host_and_path():
    from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import mirror_file_path, mirror_file_url

    url = "https://github.com/ROCm/aotriton/releases/download/0.11b/aotriton-0.11b-images-amd-gfx942.tar.gz"
    assert mirror_file_path(url) == "files/github.com/ROCm/aotriton/releases/download/0.11b/" + url.rsplit("/", 1)[1]
    assert mirror_file_url(url, "") == url
    assert mirror_file_url(url, "http://mirror.internal/") == "http://mirror.internal/" + mirror_file_path(url)
    for bad in ("", "ftp://host/file", "https://host/"):
        try:
            mirror_file_path(bad)
        except ValueError as error:
            assert "not a file URL" in str(error)
        else:
            raise AssertionError(bad)


def test_git_repository_name_reads_owner_and_name_from_any_url_form():
    from ansible_collections.instinct.stack.plugins.module_utils.mirror_layout import git_repository_name

    for url in (
        "https://github.com/ROCm/pytorch.git",
        "https://github.com/ROCm/pytorch",
        "git@github.com:ROCm/pytorch.git",
        "ssh://git@github.com/ROCm/pytorch.git",
        "http://mirror.example/git/github.com/ROCm/pytorch.git",
    ):
        assert git_repository_name(url) == "ROCm/pytorch", url
    assert git_repository_name("https://github.com/pytorch/pytorch.git") == "pytorch/pytorch"
    assert git_repository_name("http://mirror.example/pytorch.git") == ""
    assert git_repository_name("") == ""
