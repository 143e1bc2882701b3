"""netbench: emulate a cluster on one machine, train across it, measure and model the wire.

``netbench.step``, ``netbench.mark_step``, ``netbench.phase`` and ``netbench.declare_payload`` are
the step API for programs run under ``netbench exec`` (:mod:`netbench.steps`, standard library only).

``python -m netbench`` (and ``python -m netbench.worker``) put the working directory first on
``sys.path`` before this package is imported, and netbench runs as root: a ``torch.py`` or
``typing.py`` in the folder it was started from would run as root. So this package imports nothing
at the top, and under ``-m`` (``sys.argv[0]`` is ``-m`` while the interpreter looks for the module)
it takes that entry off the path before anything else is imported;
:mod:`netbench.__main__` refuses to go on where the interpreter itself already imported from there.
"""

import sys

if sys.argv[:1] == ["-m"] and not sys.flags.safe_path and sys.path:
    del sys.path[0]  # the working directory, put there by `python -m`

__version__ = "0.1.0"
__all__ = ["step", "mark_step", "phase", "declare_payload"]


def __getattr__(name: str) -> object:
    if name == "declare_payload":  # it checks settings against the replicators' declarations
        from netbench.declarations.declare import declare_payload  # late: import cycle

        return declare_payload
    if name in __all__:
        from netbench import steps  # late: import cycle

        return getattr(steps, name)
    raise AttributeError(f"module 'netbench' has no attribute {name!r}")
