# -*- coding: utf-8 -*-
# Copyright: (c) 2026, instinct.stack contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a vLLM service's /health while reading what its systemd unit does, and say so.

The first start of a large model (weights read from disk, kernels compiled) takes many minutes. The module
(instinct.stack.vllm_health) polls /health and the unit for a while and returns the unit's state and its journal's
tail; its action plugin runs it again and again, showing a progress line each time, until the service answers,
the unit gives up (it failed, stopped, or crash-loops), or the timeout passes. Everything here is pure or takes its
clock and probes as arguments, so it is tested without systemd.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

# The unit properties read (systemctl show -p ...).
PROPERTIES = (
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "ExecMainCode",
    "ExecMainStatus",
    "InactiveExitTimestampMonotonic",
)
# ActiveState values of a unit that is (re)starting or running: systemd has not given up on it.
GOING = ("active", "activating", "reloading", "deactivating", "refreshing")
# ExecMainCode (siginfo's si_code) as systemd shows it: 1 exited, 2 killed, 3 dumped core.
EXIT_CODES = {"1": "exited with status %s", "2": "was killed by signal %s", "3": "dumped core (signal %s)"}
# Environment variables whose values are secrets: masked wherever a journal line would carry them.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# Shorter values are not masked: they would mask ordinary words and numbers all over the output.
SECRET_MIN_LENGTH = 4
MASK = "********"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
MESSAGE_MAX = 300


def loopback_for(host):
    """The address to ask on this machine for a service bound to host: every address (0.0.0.0, ::, empty) is asked
    on the loopback address of its family; any other address or name as it is."""
    host = str(host or "").strip()
    if host in ("", "0.0.0.0"):  # noqa: S104 - an address compared, not bound
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def health_url(host, port, path="/health"):
    host = loopback_for(host)
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "http://%s:%d%s" % (host, int(port), path if path.startswith("/") else "/" + path)


def parse_show(text):
    """systemctl show's KEY=VALUE lines as a dict."""
    properties = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            properties[key.strip()] = value.strip()
    return properties


def _int(value, default=0):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def unit_state(properties, now_monotonic=None):
    """The unit's state in plain terms: load/active/sub state, result, restarts, how its main process ended, and
    seconds since it was started (None when it never was)."""
    started = _int(properties.get("InactiveExitTimestampMonotonic"))
    now = time.monotonic() if now_monotonic is None else now_monotonic
    code = properties.get("ExecMainCode", "0")
    status = properties.get("ExecMainStatus", "0")
    return {
        "load_state": properties.get("LoadState", ""),
        "active_state": properties.get("ActiveState", ""),
        "sub_state": properties.get("SubState", ""),
        "result": properties.get("Result", ""),
        "restarts": _int(properties.get("NRestarts")),
        "main_exit": EXIT_CODES[code] % status if code in EXIT_CODES else "",
        "started_monotonic": started / 1e6 if started else None,
        "up_seconds": max(0, int(now - started / 1e6)) if started else None,
    }


def gave_up(state, restarts):
    """Why waiting longer is pointless, or '' while systemd still runs or restarts the service.

    The unit's template restarts the service on failure without a start limit it can reach (RestartSec=5), so a
    service that cannot start crash-loops: more than `restarts` restarts since it was started count as giving up
    (restarts < 0: never).
    """
    ended = "; its main process %s" % state["main_exit"] if state["main_exit"] else ""
    if state["load_state"] and state["load_state"] != "loaded":
        return "the unit is not loaded (LoadState=%s)" % state["load_state"]
    if state["active_state"] == "failed":
        return "the unit failed (Result=%s%s) and systemd does not restart it" % (state["result"] or "?", ended)
    if state["active_state"] == "inactive":
        return "the unit stopped (inactive, Result=%s%s)" % (state["result"] or "?", ended)
    if state["active_state"] and state["active_state"] not in GOING:
        return "the unit is %s" % state["active_state"]
    if restarts is not None and restarts >= 0 and state["restarts"] > restarts:
        last = "; its main process last %s" % state["main_exit"] if state["main_exit"] else ""
        return "the service keeps crashing: systemd restarted it %d times since it was started%s" % (
            state["restarts"],
            last,
        )
    return ""


def clean_message(message):
    """One journal MESSAGE as one readable line: bytes decoded, only the last of its carriage-return segments (a
    progress bar's last state), no terminal escapes, at most MESSAGE_MAX characters."""
    if isinstance(message, list):  # journalctl -o json gives a non-UTF-8 message as its bytes
        try:
            message = bytes(message).decode("utf-8", "replace")
        except (TypeError, ValueError):
            message = ""
    message = ANSI.sub("", str(message or ""))
    segments = [segment.strip() for segment in message.replace("\r\n", "\n").split("\r")]
    segments = [segment for segment in segments if segment]
    text = " ".join((segments[-1] if segments else "").split())
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 3] + "..."


def parse_journal(text, localtime=time.localtime):
    """journalctl -o json's lines as 'YYYY-MM-DD HH:MM:SS message' strings, oldest first; empty messages dropped."""
    lines = []
    for raw in (text or "").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        message = clean_message(entry.get("MESSAGE"))
        if not message:
            continue
        usec = _int(entry.get("__REALTIME_TIMESTAMP"), None)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", localtime(usec / 1e6)) + " " if usec else ""
        lines.append(stamp + message)
    return lines


def env_secrets(text):
    """Values of the secret variables (VLLM_API_KEY, HF_TOKEN, ...) in a systemd EnvironmentFile's text."""
    secrets = set()
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("export "):
            line = line[len("export ") :]
        name, sep, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if sep and SECRET_NAME.search(name) and len(value) >= SECRET_MIN_LENGTH:
            secrets.add(value)
    return secrets


def redact(lines, secrets):
    """lines with every secret masked (the longest first, so one that contains another is masked whole)."""
    ordered = sorted((secret for secret in secrets if secret), key=len, reverse=True)
    masked = []
    for line in lines:
        for secret in ordered:
            line = line.replace(secret, MASK)
        masked.append(line)
    return masked


def journal_since(started_monotonic, now_wall=None, now_monotonic=None):
    """journalctl's --since for a unit started at started_monotonic (CLOCK_MONOTONIC seconds, what systemd records
    and time.monotonic() reads on Linux): '@EPOCH', or None when it never started."""
    if not started_monotonic:
        return None
    now_wall = time.time() if now_wall is None else now_wall
    now_monotonic = time.monotonic() if now_monotonic is None else now_monotonic
    return "@%d" % int(now_wall - (now_monotonic - started_monotonic))


def wait(probe, read_unit, timeout, delay=5, restarts=2, clock=time.monotonic, sleep=time.sleep):
    """Poll until the service answers, the unit gives up, or timeout seconds pass (at least one poll).

    probe() returns the HTTP status of /health (None when nothing answers); read_unit() returns unit_state().
    The result: healthy, status, gave_up (the reason, '' when none), unit (the last unit_state) and waited (seconds).
    """
    start = clock()
    while True:
        status = probe()
        if status == 200:
            return {"healthy": True, "status": status, "gave_up": "", "unit": None, "waited": int(clock() - start)}
        unit = read_unit()
        reason = gave_up(unit, restarts)
        waited = clock() - start
        if reason or waited + delay > timeout:
            return {"healthy": False, "status": status, "gave_up": reason, "unit": unit, "waited": int(waited)}
        sleep(delay)


def duration(seconds):
    seconds = int(max(seconds or 0, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return "%d:%02d:%02d" % (hours, minutes, seconds) if hours else "%d:%02d" % (minutes, seconds)


def describe_unit(unit):
    """'active (running) for 5:12, 1 restart' for a unit_state."""
    if not unit:
        return "unit state unknown"
    text = "%s (%s)" % (unit["active_state"] or "?", unit["sub_state"] or "?")
    if unit["up_seconds"] is not None:
        text += " for %s" % duration(unit["up_seconds"])
    if unit["restarts"]:
        text += ", %d restart%s" % (unit["restarts"], "" if unit["restarts"] == 1 else "s")
    return text


def _message_of(line):
    """A parse_journal line without its timestamp."""
    match = re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (.*)$", line)
    return match.group(1) if match else line


def progress_line(host, service, elapsed, timeout, result):
    """One line while waiting: the host, the service, time waited of the timeout, the unit and its last log line."""
    journal = result.get("journal") or []
    last = _message_of(journal[-1]) if journal else "(nothing in its journal since it started)"
    return "[%s] %s: waiting for /health, %s of %s; %s; last log: %s" % (
        host,
        service,
        duration(elapsed),
        duration(timeout),
        describe_unit(result.get("unit")),
        last,
    )


def failure_message(service, timeout, elapsed, result):
    """The failure: the existing '... did not answer /health within N s' with why, then the journal's tail."""
    reason = result.get("gave_up")
    if reason:
        why = ": the wait stopped after %s because %s" % (duration(elapsed), reason)
    else:
        why = " (%s)" % describe_unit(result.get("unit"))
    journal = result.get("journal") or []
    header = "Its journal since it started:" if result.get("since") else "Its journal's last lines:"
    return "%s did not answer /health within %d s%s. %s\n%s" % (
        service,
        int(timeout),
        why,
        header,
        "\n".join(journal) if journal else "(empty)",
    )
