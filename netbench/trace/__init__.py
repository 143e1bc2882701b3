"""A run's timeline: where each step's time went on every rank, link and TCP connection (trace.json).

Workers record spans (:mod:`netbench.trace.spans`), the orchestrator samples TCP in every node
(:mod:`netbench.trace.tcp_sampler`), and after the run :mod:`netbench.trace.build` reads the run
directory and writes trace.json in the Chrome trace-event format. Nothing here is imported
eagerly: the workers import only the span recorder.
"""
