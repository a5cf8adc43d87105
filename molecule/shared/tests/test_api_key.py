"""The services' API key on the hosts, in every scenario (verifier.additional_files_or_dirs in their molecule.yml):
it opens the API, and it lives in one file only root reads, never in the journal, a unit or a command line.

molecule sorts the test paths, so this module runs after the scenario's own tests (the airgapped scenario's -vvv
rollout among them). The key comes from molecule/shared/vault; SECRET is the value the vault holds, compared on the
controller only. No command sent to a host holds the key: the searches and the authenticated request read it on the
host, from the environment file the role wrote (after a check here that the file holds SECRET), through a pipe
(sudo closes the other descriptors, so a grep under sudo reads it from stdin).
"""

testinfra_hosts = ["inference_hosts"]

SECRET = "molecule-canary-key-5f3a9c"  # noqa: S105 - the test value the scenarios' vault file holds, searched for
UNIT = "vllm-fixture.service"
ENV_FILE = "/etc/instinct-stack/vllm/fixture.env"
MODELS = "http://127.0.0.1:8000/v1/models"
# The key, read on the host from the environment file as root (sudo logs this command, which holds no key).
KEY = "sudo sed -n 's/^VLLM_API_KEY=//p' %s" % ENV_FILE
# Where a file holding the key could be written; /proc is searched through its own check.
SEARCHED = ("/etc", "/var", "/opt", "/srv", "/home", "/root", "/tmp", "/run", "/usr/local", "/dev/shm")  # noqa: S108


def served(host):
    """What the scenario's instance serves: (the name /v1/models lists, the model `vllm serve` is given). A Hub model
    is served as its repository's name through the instance's link to the revision (instinct_model_root/served)."""
    model = host.ansible.get_variables()["vllm_service_instances"][0]["model"]
    if isinstance(model, dict):
        return model["repo"], "/var/lib/instinct-stack/models/served/fixture"
    return model, model


def bash(host, script):
    return host.run("bash -c %s", script)


def test_the_environment_file_holds_the_vaults_key_for_root_alone(host):
    with host.sudo():
        env = host.file(ENV_FILE)
        assert (env.user, env.group, env.mode) == ("root", "root", 0o600)
        assert "VLLM_API_KEY=%s\n" % SECRET in env.content_string
        directory = host.file("/etc/instinct-stack/vllm")
        assert (directory.user, directory.mode) == ("root", 0o700)
        # systemd gives it to the service's environment, which only root and the service's user read.
        main_pid = host.check_output("systemctl show -p MainPID --value %s", UNIT)
        assert main_pid != "0"
        environ = host.file("/proc/%s/environ" % main_pid).content.split(b"\0")
    assert ("VLLM_API_KEY=%s" % SECRET).encode() in environ
    assert host.run("cat %s", ENV_FILE).rc != 0
    assert host.run("cat /proc/%s/environ", main_pid).rc != 0


def test_the_key_opens_the_api_and_nothing_else_does(host):
    # The key the vault holds (the file holds it: the test above) gets the models; no key or another one gets 401.
    status = "curl -s -o /dev/null -w '%%{http_code}' %s" % MODELS
    assert host.check_output(status) == "401"
    assert host.check_output(status + " -H 'Authorization: Bearer not-the-key'") == "401"
    header = "<(%s | sed 's/^/Authorization: Bearer /')" % KEY
    answer = bash(host, "curl -s -w ' %%{http_code}' -H @%s %s" % (header, MODELS))
    assert answer.rc == 0 and answer.stdout.endswith(" 200"), answer.stdout
    assert '"id": "%s"' % served(host)[0] in answer.stdout


def test_the_key_is_in_no_other_file(host):
    # grep as root over every place a file could be written, the key read from a pipe: the environment file alone.
    found = bash(host, "%s | sudo grep -r -l -s -F -f - %s" % (KEY, " ".join(SEARCHED)))
    assert found.stdout.split() == [ENV_FILE], found.stdout


def test_no_unit_or_systemd_property_holds_the_key(host):
    listed = host.check_output("systemctl list-unit-files --no-legend 'vllm-*.service'").splitlines()
    units = [line.split()[0] for line in listed]
    assert UNIT in units
    for unit in units:
        # The unit with its drop-ins, wherever they are, and every property systemd loaded from them.
        text = host.check_output("systemctl cat %s", unit) + host.check_output("systemctl show %s", unit)
        assert "EnvironmentFile=/etc/instinct-stack/vllm/" in text, unit
        assert SECRET not in text, unit


def test_no_command_line_holds_the_key(host):
    # Every process's command line, read as root; the service's own among them.
    with host.sudo():
        cmdlines = host.check_output("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done 2>/dev/null")
    assert " serve %s " % served(host)[1] in cmdlines
    assert SECRET not in cmdlines


def test_the_journal_never_held_the_key(host):
    # Every field of every entry (-o export: the messages, and the _CMDLINE of whatever logged them), every boot.
    # The first count shows that the pattern is the key (it finds it in the file); the third that the journal is read.
    counts = bash(
        host,
        "%s | sudo grep -c -F -f - %s; " % (KEY, ENV_FILE)
        + "sudo journalctl --no-pager -o export | grep -a -c -F -f <(%s); " % KEY
        + "sudo journalctl --no-pager -o export | grep -a -c -F _SYSTEMD_UNIT=%s" % UNIT,
    )
    in_file, in_journal, service_entries = counts.stdout.split()
    assert in_file == "1" and int(service_entries) > 0, counts.stdout + counts.stderr
    assert in_journal == "0", "the journal holds the API key in %s fields" % in_journal
