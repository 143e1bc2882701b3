"""Measuring this host's model constants with real gloo collectives and the replicators' own codecs (torch).

Kept apart from :mod:`netbench.model`, which only computes with the constants and imports no torch, so
``netbench plan`` runs on a host without it.
"""
