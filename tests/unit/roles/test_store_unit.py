"""The artifact store's unit (roles/vllm/templates/instinct-stack-store.service.j2), rendered as the template module
renders it (trim_blocks, Ansible's regex_replace): nginx in the foreground as the unit's dynamic user, its runtime
directory named after the unit, and a capability only for a port below 1024."""

import os

import jinja2
from ansible.plugins.filter.core import regex_replace

ROLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    "roles", "vllm")  # fmt: skip


def unit(**overrides):
    environment = jinja2.Environment(  # noqa: S701 - a unit file, not HTML
        loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
    )
    environment.filters["regex_replace"] = regex_replace
    variables = {
        "ansible_managed": "managed",
        "vllm_store_address": "10.0.0.1",
        "vllm_store_port": 8070,
        "vllm_store_unit": "instinct-stack-store.service",
        "vllm_store_nginx_config": "/etc/instinct-stack/store/nginx.conf",
        **overrides,
    }
    text = environment.get_template("instinct-stack-store.service.j2").render(variables)
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_the_unit_runs_nginx_as_its_dynamic_user_with_no_capability():
    lines = unit()
    assert (
        "ExecStart=/usr/sbin/nginx -e stderr -p /run/instinct-stack-store/ -c /etc/instinct-stack/store/nginx.conf"
        in lines
    )
    for setting in ("RuntimeDirectory=instinct-stack-store", "DynamicUser=yes", "ProtectSystem=strict",
                    "NoNewPrivileges=yes", "ReadOnlyPaths=/", "CapabilityBoundingSet="):  # fmt: skip
        assert setting in lines
    assert not [line for line in lines if line.startswith("AmbientCapabilities")]


def test_the_runtime_directory_follows_the_units_name():
    lines = unit(vllm_store_unit="store.service")
    assert "RuntimeDirectory=store" in lines and any(" -p /run/store/ " in line for line in lines)


def test_a_port_below_1024_gets_the_one_capability_to_bind_it():
    lines = unit(vllm_store_port=80)
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in lines
    assert "CapabilityBoundingSet=CAP_NET_BIND_SERVICE" in lines
