"""`netbench exec`: any program once per node of an emulated cluster."""
