"""Facts about nodes that leave and join, declared once for the schedule that draws the churn and the model that
prices it: how few nodes a leave may leave in the run, and how long a drawn leave keeps a node away by default."""

from __future__ import annotations

__all__ = ["MIN_MEMBERS", "DEFAULT_AWAY_S"]

MIN_MEMBERS = 1  # nodes that stay in the run through every leave: with none, nothing is left to heal from
DEFAULT_AWAY_S = 6.0  # how long a node drawn to leave stays away before it joins again (--churn's away=)
