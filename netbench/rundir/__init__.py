"""The run directory: its layout (layout.py) and its typed summary (summary.py)."""
