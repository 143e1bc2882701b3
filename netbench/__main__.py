"""`python -m netbench`: the same as the `netbench` console script, where the working directory supplied nothing.

``python -m`` puts the working directory first on ``sys.path``, and the interpreter imports some of
its own modules (``importlib``, ``contextlib``...) from there before any of netbench's code runs;
the package takes that entry off the path as soon as it is imported (:mod:`netbench`). netbench
runs as root, so where a module already came from the working directory this stops with one line
(exit 2) instead of going on: run the ``netbench`` console script, or ``python -P -m netbench``.
"""

import os
import sys

import netbench


def planted_modules() -> list[str]:
    """Modules loaded from files directly in the working directory (or a package folder there), netbench's own
    aside; none where the working directory is one of the interpreter's own folders."""
    here = os.path.realpath(os.getcwd())
    if here in {os.path.realpath(p) for p in sys.path if p}:
        return []
    own = os.path.realpath(os.path.dirname(netbench.__file__ or ""))
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        real = os.path.realpath(file)
        inside = os.path.relpath(real, here)
        if not real.startswith(own + os.sep) and not inside.startswith("..") and len(inside.split(os.sep)) <= 2:
            found.append(name)
    return sorted(found)


def _main() -> None:
    planted = planted_modules()
    if planted:
        print(
            f"netbench: error: python -m imported {', '.join(planted[:5])} from the working directory before netbench "
            "could stop it; run the netbench command (or python -P -m netbench) instead",
            file=sys.stderr,
        )
        raise SystemExit(2)
    from netbench.cli.entry import main  # late: only after the check for planted modules

    main()


_main()
