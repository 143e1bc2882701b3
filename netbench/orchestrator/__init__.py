"""The orchestrator: turns a config into runs and run directories, one folder per command.

* :mod:`netbench.orchestrator.run` -- ``netbench run``: cluster, workers, capture, run directory
  (:mod:`~netbench.orchestrator.run.runner`);
* :mod:`netbench.orchestrator.exec` -- ``netbench exec``: any program once per node;
* :mod:`netbench.orchestrator.sweep` -- ``netbench sweep``: a grid of runs, point by point, and the constants its
  predictions use;
* :mod:`netbench.orchestrator.multihost` -- ``netbench worker``: one host's rank on real machines under torchrun.

Shared by them, here: the run's config (:mod:`~netbench.orchestrator.config`, :mod:`~netbench.orchestrator.host_fit`),
the phases every run goes through (:mod:`~netbench.orchestrator.phases`), the fork server that starts workers
(:mod:`~netbench.orchestrator.forkserver`, :mod:`~netbench.orchestrator.forked_workers`,
:mod:`~netbench.orchestrator.activity`), a cluster held across a sweep's runs
(:mod:`~netbench.orchestrator.cluster_reuse`), and what the model predicts for an emulated run
(:mod:`~netbench.orchestrator.prediction`, :mod:`~netbench.orchestrator.emulated_host`; the model itself,
:mod:`netbench.model`, knows nothing of the emulator). These import none of the four folders; ``run`` imports only
these; ``exec``, ``sweep`` and ``multihost`` may import ``run`` and nothing else of the four; only the CLI imports
``exec``, ``sweep`` and ``multihost`` (tests/test_architecture.py holds it).
"""
