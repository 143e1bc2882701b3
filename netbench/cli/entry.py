"""The `netbench` console script: become root of a user namespace while still single-threaded, then load the CLI.

unshare(CLONE_NEWUSER) answers EINVAL to a multi-threaded process, and loading the CLI starts
threads (numpy and torch bring OpenBLAS and OpenMP pools). So whether a command builds clusters
is decided here, from the command line alone, before anything but the standard library is
imported; :func:`netbench.rootless.ensure_privileges` later finds euid 0 and returns.
Entering the namespace creates nothing that outlives the process, so bad input is still reported
(one line, exit 2) before anything is created.
"""

from __future__ import annotations

import os
import sys

# Commands that build namespaces (or look for them). `worker` is not one: it measures the real
# host's interface and must stay in the host's network namespace.
CLUSTER_COMMANDS = frozenset({"doctor", "probe", "run", "sweep", "clean", "exec"})
_HELP = frozenset({"--help", "-h"})


def needs_user_namespace(argv: list[str], euid: int) -> bool:
    """True for a non-root caller whose command builds clusters (and is not just asking for help)."""
    return euid != 0 and bool(argv) and argv[0] in CLUSTER_COMMANDS and not _HELP.intersection(argv)


def enter_if_needed(argv: list[str]) -> None:
    """Enter the rootless namespace where the command needs one and the kernel allows it.

    Where user namespaces are disabled nothing happens here: the command itself then refuses
    with a one-line reason after checking its input.
    """
    if not needs_user_namespace(argv, os.geteuid()):
        return
    from netbench import rootless  # late: standard library only: still single-threaded

    if not rootless.user_namespaces_allowed():
        return
    try:
        rootless.enter_user_namespace()
    except rootless.RootlessError as exc:
        print(f"netbench: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:
    enter_if_needed(sys.argv[1:])
    from netbench.cli.app import (  # late: keeps the CLI's packages off
        main as cli_main,
    )  # late: keeps the CLI's packages off

    try:
        cli_main()
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        from netbench.cli.privileges import (  # late: entered single-threaded, before the CLI
            torch_missing_message,
        )  # late: entered single-threaded, before the CLI

        command = sys.argv[1] if len(sys.argv) > 1 else "this command"
        print(f"netbench: error: {torch_missing_message(command)}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
