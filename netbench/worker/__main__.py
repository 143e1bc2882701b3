"""``python -m netbench.worker --spec spec.json``: one node's training process.

Exit codes: 0 after the done event, 1 after an error event, 2 when the spec itself is unusable
(nothing can be written then: the output path is part of the spec).

After the run the process leaves without interpreter teardown (see :mod:`netbench.worker.hard_exit`):
torch's C++ teardown occasionally aborts and would turn a finished run into exit code -6.
"""

from __future__ import annotations

import argparse
import os
import sys

from netbench.worker.hard_exit import exit_without_teardown
from netbench.worker.spec import SpecError, load_spec, resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netbench.worker", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spec",
        required=True,
        help="WorkerSpec JSON file; rank fields left out are read from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT",
    )
    args = parser.parse_args(argv)
    try:
        resolved = resolve(load_spec(args.spec))
    except SpecError as exc:
        print(f"netbench worker: error: {exc}", file=sys.stderr)
        return 2
    if resolved.spec.workload.kind == "python":  # the run the user started named it; its spec runs in their folder
        from netbench.workloads.python import name_for_run  # late: keeps torch off this module's import

        name_for_run(resolved.spec.workload.factory, os.getcwd())
    from netbench.worker.loop import run_worker  # late: torch loads only once the spec is known to be good

    return run_worker(resolved)


if __name__ == "__main__":
    exit_without_teardown(main())
