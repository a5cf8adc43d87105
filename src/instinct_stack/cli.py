"""The instinct-stack command line.

Exit codes, the same for every subcommand: 0 every host fine; 1 a host failed or was unreachable (or a mirror
build failed); 2 bad input or nothing ran (an inventory that does not exist or parse, a --limit or inventory that
matches no host, bad options).
"""

import argparse
import getpass
import json
import sys
from collections.abc import Sequence
from typing import Any

from instinct_stack import __version__
from instinct_stack.collection import BadInput
from instinct_stack.detect import detect, format_table

EXIT_OK, EXIT_HOST_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# ansible-playbook's own prompts, answered by ansible-runner from what the user typed here.
BECOME_PROMPT = r"^BECOME password.*:\s*?$"
VAULT_PROMPT = r"^Vault password.*:\s*?$"


def ansible_options(parser: argparse.ArgumentParser, tags: bool = True) -> None:
    """The ansible-playbook controls every Ansible user reaches for, passed through unchanged."""
    group = parser.add_argument_group("ansible-playbook options (passed through)")
    group.add_argument(
        "-i", "--inventory", action="append", required=True, help="inventory file, directory or host list (repeatable)"
    )
    group.add_argument("-l", "--limit", help="limit to these hosts or groups (ansible --limit pattern)")
    group.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="extra variables: key=value, YAML/JSON or @file",
    )
    if tags:
        group.add_argument("-t", "--tags", action="append", default=[], help="run only plays and tasks with these tags")
        group.add_argument("--skip-tags", action="append", default=[], help="skip plays and tasks with these tags")
        group.add_argument("--diff", action="store_true", help="show the differences in changed files")
    group.add_argument("-v", "--verbose", action="count", default=0, help="ansible-playbook verbosity (-v to -vvvv)")
    group.add_argument("-f", "--forks", type=int, help="parallel processes")
    group.add_argument("-u", "--user", help="connect as this user")
    group.add_argument("--private-key", metavar="FILE", help="SSH private key file")
    group.add_argument("-K", "--ask-become-pass", action="store_true", help="ask for the privilege escalation password")
    group.add_argument("--ask-vault-pass", action="store_true", help="ask for the vault password")
    group.add_argument("--vault-password-file", action="append", default=[], metavar="FILE", help="vault password file")
    group.add_argument("--vault-id", action="append", default=[], help="vault identity (label@source)")
    parser.add_argument(
        "--record",
        nargs="?",
        const=True,
        metavar="ARA_DIR",
        help="record the run with ARA (ARA Records Ansible) in a local SQLite database; "
        "default directory: $XDG_STATE_HOME/instinct-stack/ara (browse it with: ARA_BASE_DIR=DIR ara-manage runserver)",
    )
    parser.add_argument(
        "--run-dir",
        help="where to keep ansible-runner's artifacts (job events, stdout) for this run; "
        "default: a new directory under $XDG_STATE_HOME/instinct-stack/runs",
    )


def playbook_run_options(parser: argparse.ArgumentParser) -> None:
    """rollout's and rollback's options: ansible-playbook's, check mode and the report."""
    ansible_options(parser)
    parser.add_argument("-C", "--check", action="store_true", help="check mode: report what would change")
    parser.add_argument("--report", help="where to write the JSON report (default: RUN_DIR/report.json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of the table")


def playbook_args(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """(ansible-playbook arguments, ansible-runner passwords) from the parsed options; secrets only in passwords."""
    argv = []
    for value in args.extra_vars:
        argv += ["--extra-vars", value]
    for option in ("tags", "skip_tags"):
        values = getattr(args, option, None) or []
        if values:
            argv += ["--" + option.replace("_", "-"), ",".join(values)]
    if getattr(args, "diff", False):
        argv.append("--diff")
    if args.verbose:
        argv.append("-" + "v" * min(args.verbose, 4))
    if args.forks is not None:
        if args.forks < 1:
            raise BadInput("--forks must be at least 1, got %d" % args.forks)
        argv += ["--forks", str(args.forks)]
    if args.user:
        argv += ["--user", args.user]
    if args.private_key:
        argv += ["--private-key", args.private_key]
    for value in args.vault_password_file:
        argv += ["--vault-password-file", value]
    for value in args.vault_id:
        argv += ["--vault-id", value]
    passwords = {}
    if args.ask_become_pass:
        argv.append("--ask-become-pass")
        passwords[BECOME_PROMPT] = getpass.getpass("BECOME password: ")
    if args.ask_vault_pass:
        argv.append("--ask-vault-pass")
        passwords[VAULT_PROMPT] = getpass.getpass("Vault password: ")
    return argv, passwords


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    from instinct_stack.collection import default_ara_dir

    argv, passwords = playbook_args(args)
    record = None
    if args.record:
        record = default_ara_dir() if args.record is True else args.record
        print("recording the run with ARA in %s" % record, file=sys.stderr)
    return {"cmdline_args": argv, "passwords": passwords, "run_dir": args.run_dir, "record": record}


def _detect_extravars(args: argparse.Namespace) -> dict[str, Any]:
    extravars = {}
    if args.source:
        extravars["rocm_gfx_source"] = args.source
    if args.sysfs_root:
        extravars["instinct_sysfs_root"] = args.sysfs_root
    if args.rocminfo_path:
        extravars["instinct_rocminfo_path"] = args.rocminfo_path
    if args.allow_no_gpu:
        extravars["rocm_require_gpu"] = False
    return extravars


def cmd_detect(args: argparse.Namespace) -> int:
    rows, rc, output, run_dir = detect(
        args.inventory, limit=args.limit, extravars=_detect_extravars(args), **_run_options(args)
    )
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        print(format_table(rows))
    if not rows:
        print(
            "no host ran gfx_arch (an inventory without hosts, or a --limit that matched nothing); "
            "ansible-playbook rc=%s:\n%s" % (rc, output[-3000:]),
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    print("run directory: %s" % run_dir, file=sys.stderr)
    return EXIT_OK if all(row["ok"] for row in rows) else EXIT_HOST_FAILED


def cmd_rollout(args: argparse.Namespace) -> int:
    from instinct_stack.rollout import exit_code, rollout, summary_table

    report, output, run_dir = rollout(
        args.inventory, limit=args.limit, check=args.check, playbook=args.playbook, **_run_options(args)
    )
    report_path = args.report or "%s/report.json" % run_dir
    with open(report_path, "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
    code = exit_code(report)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        summary_table(report, sys.stdout)
    if code == EXIT_BAD_INPUT:
        print(
            "nothing ran: ansible-playbook stopped before any host (rc=%s); its output ends with:\n%s"
            % (report["rc"], output[-3000:] or "(nothing)"),
            file=sys.stderr,
        )
    print(
        "report: %s\nrun directory: %s (ansible-runner artifacts: job events, stdout)" % (report_path, run_dir),
        file=sys.stderr,
    )
    return code


def cmd_status(args: argparse.Namespace) -> int:
    from instinct_stack.status import format_status, status

    rows, rc, output, run_dir = status(args.inventory, limit=args.limit, **_run_options(args))
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        print(format_status(rows))
    if not rows:
        print("no host answered (rc=%s):\n%s" % (rc, output[-3000:]), file=sys.stderr)
        return EXIT_BAD_INPUT
    print("run directory: %s" % run_dir, file=sys.stderr)
    return EXIT_OK if all(row["ok"] for row in rows) else EXIT_HOST_FAILED


def cmd_mirror_build(args: argparse.Namespace) -> int:
    from instinct_stack import mirror

    try:
        manifest = mirror.build(args.config, args.dest)
    except mirror.MirrorError as exc:
        print("mirror build failed: %s" % exc, file=sys.stderr)
        return EXIT_HOST_FAILED
    print(
        "mirror %s: %d files, ROCm %s (%s), %s"
        % (
            args.dest,
            len(manifest["files"]),
            manifest["rocm_version"],
            manifest["suite"],
            ", ".join("%s@%s" % (name, ref["commit"][:12]) for name, ref in sorted(manifest["git"].items()))
            or "no git",
        )
    )
    return EXIT_OK


def cmd_mirror_verify(args: argparse.Namespace) -> int:
    from instinct_stack import mirror

    problems = mirror.verify(args.dest)
    for problem in problems:
        print(problem)
    print("%s: %s" % (args.dest, "%d problem(s)" % len(problems) if problems else "every file matches the manifest"))
    return EXIT_HOST_FAILED if problems else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="instinct-stack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    commands = parser.add_subparsers(dest="command", required=True)

    detect_parser = commands.add_parser("detect", help="detect the gfx architecture of every GPU on every host")
    ansible_options(detect_parser, tags=False)
    detect_parser.add_argument("--source", choices=["auto", "kfd", "rocminfo", "pci"], help="detection source")
    detect_parser.add_argument("--sysfs-root", help="read sysfs from this directory instead of /sys")
    detect_parser.add_argument("--rocminfo-path", help="rocminfo executable to run")
    detect_parser.add_argument(
        "--allow-no-gpu", action="store_true", help="report hosts without GPUs instead of failing"
    )
    detect_parser.add_argument("--json", action="store_true", help="print the per-host results as JSON")
    detect_parser.set_defaults(handler=cmd_detect)

    rollout_parser = commands.add_parser(
        "rollout", help="run the collection's site.yml with live per-host progress and a JSON report"
    )
    playbook_run_options(rollout_parser)
    rollout_parser.set_defaults(handler=cmd_rollout, playbook="playbooks/site.yml")

    rollback_parser = commands.add_parser(
        "rollback",
        help="switch each host back to its previous verified stack, a batch at a time, with the same health waits",
    )
    playbook_run_options(rollback_parser)
    rollback_parser.set_defaults(handler=cmd_rollout, playbook="playbooks/rollback.yml")

    status_parser = commands.add_parser(
        "status", help="read-only: driver, ROCm, gfx arch, stack and services of every host"
    )
    ansible_options(status_parser, tags=False)
    status_parser.add_argument("--json", action="store_true", help="print the per-host status as JSON")
    status_parser.set_defaults(handler=cmd_status)

    mirror_parser = commands.add_parser("mirror", help="build or verify an air-gapped mirror")
    mirror_commands = mirror_parser.add_subparsers(dest="mirror_command", required=True)
    build = mirror_commands.add_parser(
        "build", help="gather ROCm and distribution packages, sources and wheels into DEST (needs network)"
    )
    build.add_argument(
        "config",
        help="YAML: rocm_version, amdgpu_version, suite, repo_base_url, packages, distributions, git, wheels",
    )
    build.add_argument("dest", help="an empty or new directory")
    build.set_defaults(handler=cmd_mirror_build)
    check = mirror_commands.add_parser("verify", help="check DEST against its manifest")
    check.add_argument("dest")
    check.set_defaults(handler=cmd_mirror_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except BadInput as exc:
        print("instinct-stack %s: %s" % (args.command, exc), file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
