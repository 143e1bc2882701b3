"""Hypothesis profiles for the fuzz suites: ``ci`` (the default: fixed examples, a few minutes on 2 cores in all) and
``deep`` (ten times the examples, fresh ones each run): ``HYPOTHESIS_PROFILE=deep python3 -m pytest tests/test_fuzz_*``.

A fuzz test asks for its share with :func:`examples`, so one profile scales every suite alike.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=100, derandomize=True, **_COMMON)
settings.register_profile("deep", max_examples=1000, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(ci_count: int) -> int:
    """``ci_count`` under the ci profile, scaled with the loaded profile's examples (ten times under deep)."""
    return ci_count * settings.default.max_examples // 100
