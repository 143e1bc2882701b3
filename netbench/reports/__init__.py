"""Reports: read run and sweep folders and write what a reader looks at; they run nothing.

* :mod:`~netbench.reports.report` / :mod:`~netbench.reports.plots` -- report.md and the figures;
* :mod:`~netbench.reports.html` -- report.html; :mod:`~netbench.reports.compare` -- a sweep against a baseline;
* :mod:`~netbench.reports.steps` -- per-step spread from steps.csv;
* :mod:`~netbench.reports.target` -- time to target loss.

Running a sweep's grid is the orchestrator's (:mod:`netbench.orchestrator.sweep.sweep`).
"""
