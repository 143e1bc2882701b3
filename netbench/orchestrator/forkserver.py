"""``python -m netbench.orchestrator.forkserver``: a worker launcher that imports torch once, forks a run's workers.

Starting a worker costs a Python interpreter and torch's import (seconds on a busy 2-core host) before
its first step; a run would pay it once per node, a sweep once per point and node, and a 64-node run on
2 cores would hold 64 copies of torch in memory. The fork server runs beside the orchestrator for the
whole run or sweep, imports torch and the training loop once, and forks a child for
each worker the orchestrator asks for; the child enters its node's network namespace and is then a
worker as ``python -m netbench.worker`` would be: its own process group, its own log, its own spec,
a fresh gloo process group and fresh connections; it leaves with ``os._exit`` (no interpreter
teardown). Nothing runs torch in the server itself, so no thread pool exists yet when it forks.

The same server forks a sweep's calibration: a request that names a netbench function instead of a spec,
``{"call": "netbench.MODULE:FUNCTION", "args": [...], "log": PATH, "threads": T}``, forks a child that calls it in the
server's own namespace (exit code 0 when it returned).

Protocol, one JSON object a line. The orchestrator writes
``{"netns": NAME, "spec": PATH, "log": PATH, "nice": N, "threads": T}``; the server answers ``{"started": PID}`` for it
and ``{"exited": PID, "code": C}`` once that child is reaped (C negative: the signal that killed it).
The server says ``ready`` when its imports are done, and exits when its input closes.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import sys
import traceback
from typing import Any, NoReturn

from netbench import signals
from netbench.emulation import netns

POLL_S = 0.02  # how often finished children are reaped when no request arrives


def main() -> int:
    _preload()

    _say("ready")
    children: set[int] = set()
    while True:
        _reap(children)
        readable, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if not readable:
            continue
        line = sys.stdin.readline()
        if not line:
            return 0
        pid = os.fork()
        if pid == 0:
            _child(json.loads(line))
        children.add(pid)
        _say(json.dumps({"started": pid}))


def _preload() -> None:
    """Import what every worker imports: torch, netbench's training loop and replicators, and what torch imports
    lazily when the first optimizer is built (its compiler stack with sympy: most of a second on its own)."""
    import torch  # noqa: F401  # late: keeps torch off this module's import
    import torch.distributed  # noqa: F401  # late: keeps torch off this module's import
    import torch.optim  # noqa: F401  # late: keeps torch off this module's import

    from netbench.declarations import (  # late: the running server preloads it
        registry,
    )  # late: the running server preloads it
    from netbench.replicators.build import (  # late: the running server preloads it
        replicator_class,
    )  # late: the running server preloads it
    from netbench.worker import loop  # noqa: F401  # late: keeps torch off this module's import

    for name in registry.names():  # the implementations load when first named
        replicator_class(name)
    importlib.import_module("torch._dynamo")
    gc.collect()
    gc.freeze()  # what the imports made stays out of every child's collections (and its pages unshared by them)


def _reap(children: set[int]) -> None:
    """Report every child that has exited (and reap it)."""
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            _say(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}))


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _child(request: dict[str, Any]) -> NoReturn:
    """In the forked child: become a worker (own process group and log, lowered priority), run it, leave without
    teardown.
    """
    code = 1
    try:
        parent = os.getppid()
        os.setpgid(0, 0)  # the orchestrator kills a worker's whole group, never the server's
        netns.die_with_parent(parent)
        if "netns" in request:
            netns.enter(str(request["netns"]))
        signals.as_fresh_interpreter()
        _redirect(str(request["log"]))
        if request.get("nice"):
            os.nice(int(request["nice"]))
        os.environ["OMP_NUM_THREADS"] = str(int(request["threads"]))
        if "call" in request:
            code = _call(str(request["call"]), list(request.get("args", [])))
        else:
            from netbench.worker.__main__ import (  # late: the running server preloads it
                main as worker_main,
            )  # late: the running server preloads it

            code = worker_main(["--spec", str(request["spec"])])
    except BaseException:  # noqa: BLE001 - the log says why; the exit code says that it failed
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _call(target: str, args: list[Any]) -> int:
    """Call netbench's ``module:function`` with ``args``; 0 once it returned."""
    module, _, name = target.partition(":")
    if not module.startswith("netbench.") or not name.isidentifier():
        raise ValueError(f"not a netbench function: {target!r}")
    getattr(importlib.import_module(module), name)(*args)
    return 0


def _redirect(log: str) -> None:
    """Standard output and error into the worker's log (made by the orchestrator; never followed through a link)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    null = os.open(os.devnull, os.O_RDONLY)
    sys.stdout.flush()
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)


if __name__ == "__main__":
    sys.exit(main())
