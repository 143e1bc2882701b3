"""`python -m netbench`: the same as the `netbench` console script.

``python -m`` puts the working directory first on ``sys.path``; netbench runs as root, so a
``pydantic.py`` or ``torch.py`` in the folder it was started from would run as root. By now
netbench itself is imported, so that entry goes before anything else is (the console script never
has it; a ``python:`` workload adds the folder back for the module the user named).
"""

import os
import sys

if sys.path and not sys.flags.safe_path and os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.curdir):
    del sys.path[0]

from netbench.cli.entry import main  # noqa: E402 - after the path is cleaned

main()
