"""netbench: emulate a cluster on one machine, train across it, measure and model the wire."""

__version__ = "0.1.0"
