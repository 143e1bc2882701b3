"""The orchestrator: turns a config into runs and run directories.

* :mod:`~netbench.orchestrator.runner` -- ``netbench run``: cluster, workers, capture, run directory;
* :mod:`~netbench.orchestrator.execute` -- ``netbench exec``: any program once per node;
* :mod:`~netbench.orchestrator.torchrun` -- ``netbench worker``: one host's rank on real machines under torchrun;
* :mod:`~netbench.orchestrator.sweep_scenario` / :mod:`~netbench.orchestrator.sweep` /
  :mod:`~netbench.orchestrator.sweep_calibration` -- a sweep's grid, run point by point, and the constants its
  predictions use;
* :mod:`~netbench.orchestrator.prediction` / :mod:`~netbench.orchestrator.testbed` -- what the model predicts for
  an emulated run (the model itself, :mod:`netbench.model`, knows nothing of the emulator).
"""
