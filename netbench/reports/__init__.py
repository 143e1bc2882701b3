"""Sweeps and their reports: a grid of runs (``sweep``), measured beside the model (``report``, ``plots``).

* :mod:`~netbench.reports.scenario` -- the TOML/CLI scenario, validated into one RunConfig per point;
* :mod:`~netbench.reports.sweep` -- runs the points resumably, keeps ``summary.csv`` current;
* :mod:`~netbench.reports.calibrate` -- which model constants the predictions use (measured on request);
* :mod:`~netbench.reports.report` / :mod:`~netbench.reports.plots` -- report.md and the figures.
"""
