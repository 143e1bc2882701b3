"""Each replicator declared once, without torch: its settings, payload per step, codec costs and collectives.

The model, the planner, the CLI and the reports read these declarations; :mod:`netbench.replicators` holds the
torch codecs they name. Importing this package imports no torch.
"""
