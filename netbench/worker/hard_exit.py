"""Leave a worker process without interpreter teardown, keeping the run's own exit code.

After a run every record is already in the kernel (see :mod:`netbench.rundir.records`) and the
process group is destroyed, but torch's C++ teardown at interpreter exit occasionally aborts
("terminate called without an active exception", SIGABRT) once gloo and the TCP store have been
used (seen here in about one worker in ten under load; the same symptom as pytorch/pytorch#190489),
which would turn a finished run into exit code -6. Skipping that teardown keeps the exit code the
run's own. Used by ``python -m netbench.worker`` and by ``netbench worker``.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_without_teardown(code: int) -> NoReturn:
    """Flush what Python still buffers, then leave with ``os._exit`` (see the module docstring)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
