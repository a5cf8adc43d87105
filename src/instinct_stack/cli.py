"""The instinct-stack command line."""

import argparse
import json
import sys

from instinct_stack import __version__
from instinct_stack.detect import detect, format_table
from instinct_stack.rollout import rollout


def _detect_extravars(args):
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


def cmd_detect(args):
    rows, rc, output = detect(args.inventory, limit=args.limit, extravars=_detect_extravars(args))
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        print(format_table(rows))
    if not rows:
        print(
            "no host ran gfx_arch (empty inventory, or --limit matched nothing); ansible-playbook rc=%s:\n%s"
            % (rc, output[-3000:]),
            file=sys.stderr,
        )
        return 2
    return 0 if all(row["ok"] for row in rows) else 1


def cmd_rollout(args):
    report, output = rollout(args.inventory, limit=args.limit, check=args.check)
    with open(args.report, "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
    for host, entry in sorted(report["hosts"].items()):
        state = "FAILED" if entry["failures"] else "ok"
        print(
            "%-24s %-6s changed=%-3d gfx=%s stack=%s"
            % (
                host,
                state,
                entry["changed"],
                ",".join(entry["gfx_arch"] or []) or "-",
                (entry["stack"] or {}).get("vllm", "-"),
            )
        )
        if (entry.get("reboot") or {}).get("pending"):
            print("    reboot pending: %s" % entry["reboot"]["reason"])
        for failure in entry["failures"]:
            print("    %s: %s" % (failure["task"], failure["msg"]))
    print("report: %s" % args.report)
    if not report["ok"] and not report["hosts"]:
        print(output[-3000:], file=sys.stderr)
    return 0 if report["ok"] else 1


def cmd_mirror_build(args):
    from instinct_stack import mirror

    try:
        manifest = mirror.build(args.config, args.dest)
    except mirror.MirrorError as exc:
        print("mirror build failed: %s" % exc, file=sys.stderr)
        return 1
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
    return 0


def cmd_mirror_verify(args):
    from instinct_stack import mirror

    problems = mirror.verify(args.dest)
    for problem in problems:
        print(problem)
    print("%s: %s" % (args.dest, "%d problem(s)" % len(problems) if problems else "every file matches the manifest"))
    return 1 if problems else 0


def build_parser():
    parser = argparse.ArgumentParser(prog="instinct-stack", description=__doc__)
    parser.add_argument("--version", action="version", version="%(prog)s " + __version__)
    commands = parser.add_subparsers(dest="command", required=True)

    detect_parser = commands.add_parser("detect", help="detect the gfx architecture of every GPU on every host")
    detect_parser.add_argument("-i", "--inventory", required=True, help="inventory file or directory")
    detect_parser.add_argument("-l", "--limit", help="limit to these hosts or groups (ansible --limit pattern)")
    detect_parser.add_argument("--source", choices=["auto", "kfd", "rocminfo", "pci"], help="detection source")
    detect_parser.add_argument("--sysfs-root", help="read sysfs from this directory instead of /sys")
    detect_parser.add_argument("--rocminfo-path", help="rocminfo executable to run")
    detect_parser.add_argument(
        "--allow-no-gpu", action="store_true", help="report hosts without GPUs instead of failing"
    )
    detect_parser.add_argument("--json", action="store_true", help="print the per-host results as JSON")
    detect_parser.set_defaults(handler=cmd_detect)

    rollout_parser = commands.add_parser("rollout", help="run site.yml with live per-host progress and a JSON report")
    rollout_parser.add_argument("-i", "--inventory", required=True, help="inventory file or directory")
    rollout_parser.add_argument("-l", "--limit", help="limit to these hosts or groups (ansible --limit pattern)")
    rollout_parser.add_argument("--check", action="store_true", help="check mode: report what would change")
    rollout_parser.add_argument("--report", default="instinct-stack-report.json", help="where to write the JSON report")
    rollout_parser.set_defaults(handler=cmd_rollout)

    mirror_parser = commands.add_parser("mirror", help="build or verify an air-gapped mirror")
    mirror_commands = mirror_parser.add_subparsers(dest="mirror_command", required=True)
    build = mirror_commands.add_parser("build", help="gather packages, sources and wheels into DEST (needs network)")
    build.add_argument("config", help="YAML: rocm_version, amdgpu_version, suite, repo_base_url, packages, git, wheels")
    build.add_argument("dest", help="an empty or new directory")
    build.set_defaults(handler=cmd_mirror_build)
    check = mirror_commands.add_parser("verify", help="check DEST against its manifest")
    check.add_argument("dest")
    check.set_defaults(handler=cmd_mirror_verify)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
