"""Networks that change during a run: a schedule of timed link and node changes, read from a file or a trace."""

from netbench.schedule.model import ALL, Change, Schedule, Segment
from netbench.schedule.parse import ScheduleError, load, parse_text

__all__ = ["ALL", "Change", "Schedule", "Segment", "ScheduleError", "load", "parse_text"]
