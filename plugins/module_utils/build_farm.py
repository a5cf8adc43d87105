# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The build farm: which build host compiles which arch list, and in which waves the torch builds run.

Pure functions, so the assignment is decided in one place and tested without Ansible.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class BuildFarmError(ValueError):
    """The build farm's inventory or pins cannot be honoured; the message says what to fix."""


def _arch_set(arch_list):
    # "gfx942;gfx90a" and "gfx90a;gfx942" are the same arch list: pins match whatever order the user wrote.
    return frozenset(part.strip() for part in str(arch_list).split(";") if part.strip())


def assign(arch_lists, build_hosts, pinned=None, default_host=None, inventory_hosts=None):
    """{arch list: build host} for every arch list.

    With zero or one build host every arch list goes to default_host (the role's build_host), exactly as
    before there was a farm. With several, an arch list pinned to a host (pinned: {build host: [arch lists]}) goes
    there; the others, sorted, each go to the build host with the fewest arch lists so far, ties to the first in
    inventory order: without pins that is round-robin, and the same inputs always give the same assignment (a
    build host keeps the arch lists whose wheels its cache holds as long as the set of arch lists stays the same).
    """
    pinned = pinned or {}
    if not isinstance(pinned, dict):
        raise BuildFarmError("build_host_archs must map build hosts to lists of arch lists, got %r" % (pinned,))
    build_hosts = list(build_hosts or [])
    for host in build_hosts:
        if not isinstance(host, str) or not host.strip():
            raise BuildFarmError(
                "the build_hosts group has an empty entry (%r): list the build hosts by inventory name" % (host,)
            )
    if inventory_hosts is not None:
        unknown = [host for host in build_hosts if host not in inventory_hosts]
        if unknown:
            raise BuildFarmError(
                "build host(s) %s are not in the inventory: add them to it or remove them from build_hosts"
                % ", ".join(unknown)
            )
    if len(set(build_hosts)) != len(build_hosts):
        build_hosts = sorted(set(build_hosts), key=build_hosts.index)
    stray = sorted(host for host in pinned if host not in build_hosts)
    if stray:
        raise BuildFarmError(
            "build_host_archs pins arch lists to %s, which %s not in the build_hosts group (%s): add %s to "
            "build_hosts or remove %s from build_host_archs"
            % (
                ", ".join(stray),
                "is" if len(stray) == 1 else "are",
                ", ".join(build_hosts) or "empty",
                "it" if len(stray) == 1 else "them",
                "it" if len(stray) == 1 else "them",
            )
        )
    arch_lists = sorted(set(arch_lists))
    if len(build_hosts) <= 1:
        host = build_hosts[0] if build_hosts else default_host
        if not host:
            raise BuildFarmError("no build host: set build_host or add a host to the build_hosts group")
        return dict((arch, host) for arch in arch_lists)

    pinned_to = {}
    for host in build_hosts:
        entries = pinned.get(host) or []
        if isinstance(entries, str):
            entries = [entries]
        for entry in entries:
            key = _arch_set(entry)
            if key in pinned_to and pinned_to[key] != host:
                raise BuildFarmError(
                    "build_host_archs pins the arch list %s to both %s and %s: keep it under one build host"
                    % (entry, pinned_to[key], host)
                )
            pinned_to[key] = host

    assignment = {}
    load = dict((host, 0) for host in build_hosts)
    for arch in arch_lists:
        host = pinned_to.get(_arch_set(arch))
        if host:
            assignment[arch] = host
            load[host] += 1
    for arch in arch_lists:
        if arch in assignment:
            continue
        host = min(build_hosts, key=lambda candidate: (load[candidate], build_hosts.index(candidate)))
        assignment[arch] = host
        load[host] += 1
    return assignment


def waves(assignment, build_hosts=None):
    """The arch lists in waves: wave i holds the i-th arch list (sorted) of each build host that has one.

    The builds of one wave run at once, each on its own build host; the next wave starts when they are done. So a
    build host never runs two torch builds at once (MAX_JOBS is sized for its memory), and each async build's
    timeout counts its own build only, not the time it would wait behind another one on the same host.
    With one build host each wave is one arch list: the builds run one after another, as before there was a farm.
    """
    order = list(build_hosts or [])
    hosts = sorted(
        set(assignment.values()), key=lambda host: (order.index(host) if host in order else len(order), host)
    )
    per_host = dict((host, sorted(arch for arch, owner in assignment.items() if owner == host)) for host in hosts)
    depth = max([len(archs) for archs in per_host.values()] or [0])
    return [[per_host[host][i] for host in hosts if i < len(per_host[host])] for i in range(depth)]


def ccache_stats(text):
    """{hits, misses, hit_rate} from `ccache --print-stats` (ccache >= 4: one "name<TAB>value" per line), or None.

    Hits are direct and preprocessed hits and misses are cache_miss, as `ccache --show-stats` counts them; hit_rate
    is hits / (hits + misses), None when nothing was compiled.
    """
    counters = {}
    for line in (text or "").splitlines():
        name, sep, value = line.strip().partition("\t")
        if sep and value.strip().lstrip("-").isdigit():
            counters[name.strip()] = int(value)
    if "cache_miss" not in counters:
        return None
    hits = counters.get("direct_cache_hit", 0) + counters.get("preprocessed_cache_hit", 0)
    misses = counters["cache_miss"]
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(float(hits) / total, 4) if total else None}
