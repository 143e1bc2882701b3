"""The run directory: its layout (layout.py), its typed summary (summary.py), a sweep folder's layout (sweepdir.py), and
reading them back as untrusted input (reading.py, runjson.py).
"""
