"""How netbench starts its own modules as child processes: they import netbench's code and nothing planted.

netbench runs as root. ``python -m MODULE`` puts the working directory first on ``sys.path``, and
``PYTHONPATH`` and the user's site-packages after it, so a ``pydantic.py`` in the folder a user ran
netbench from would run as root inside every worker, the delay line and the shaping guard. Every
netbench module a child runs is therefore started through :func:`netbench_module_argv`:

- ``python -I`` (isolated): no working directory, no ``PYTHONPATH``, no user site-packages;
- exactly one folder put first on the child's path: the one that holds the running ``netbench``
  package, so the child runs the very netbench the parent runs (an editable install or a
  development tree included);
- a working directory no other user can write to (``/``), unless the caller names one: a worker
  runs in the folder netbench was started from, where its spec's relative paths lead (``--out``, a
  shapes file, a ``python:`` workload's data). Isolated, it never imports from there; only a
  ``python:`` workload adds that folder to its path, to import the module the user named.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import netbench

__all__ = ["NETBENCH_ROOT", "DEFAULT_WORKDIR", "netbench_module_argv", "spawning_safely"]

NETBENCH_ROOT = str(Path(netbench.__file__).resolve().parent.parent)  # the folder that holds the netbench package
DEFAULT_WORKDIR = "/"  # owned by root, writable by no one else

# Runs in the child before any netbench code: its inputs are argv items, never text pasted into code.
_BOOTSTRAP = (
    "import os, runpy, sys\n"
    "root, workdir, module = sys.argv[1:4]\n"
    "sys.path[:] = [root, *(p for p in sys.path if os.path.isabs(p) and p != root)]\n"
    "os.chdir(workdir)\n"
    "sys.argv[:] = [module, *sys.argv[4:]]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def netbench_module_argv(module: str, *args: str, workdir: str | Path = DEFAULT_WORKDIR) -> list[str]:
    """The command line that runs netbench's ``module`` (as ``python -m`` would) with ``args``, isolated (see above)."""
    if module != "netbench" and not module.startswith("netbench."):
        raise ValueError(f"not a netbench module: {module!r}")
    return [sys.executable, "-I", "-c", _BOOTSTRAP, NETBENCH_ROOT, str(workdir), module, *map(str, args)]


@contextlib.contextmanager
def spawning_safely() -> Iterator[None]:
    """Around ``multiprocessing``'s spawn (torch's ``start_processes``): its children start as ``python -c`` and import
    ``multiprocessing`` before anything else, from the working directory first and from ``PYTHONPATH``. For the block
    the working directory is DEFAULT_WORKDIR and ``PYTHONPATH`` is unset, so they import the interpreter's own; once
    started they take the parent's ``sys.path`` (netbench's package included) as spawn always does.
    """
    before, pythonpath = os.getcwd(), os.environ.pop("PYTHONPATH", None)
    os.chdir(DEFAULT_WORKDIR)
    try:
        yield
    finally:
        os.chdir(before)
        if pythonpath is not None:
            os.environ["PYTHONPATH"] = pythonpath
