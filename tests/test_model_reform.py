"""The price of a re-formed quorum's new process group: its configuration in round trips, the first call's fresh
connections, and the compute a per-step quorum hides it behind."""

from __future__ import annotations

import pytest

from netbench.declarations.config import ReplicatorConfig
from netbench.model.framing import Framing
from netbench.model.reform import (
    CONFIGURE_ROUND_TRIPS,
    CONFIGURE_ROUND_TRIPS_PER_PEER,
    CONFIGURE_SOFTWARE_PER_PEER_S,
    CONFIGURE_SOFTWARE_S,
    configure_time_s,
    fresh_call_s,
    reform_time_s,
)
from netbench.model.schemes import Scheme
from netbench.shapes import ParamShape
from netbench.tcp import TcpSettings

SHAPES = [ParamShape("w", (470_528,))]
TCP = TcpSettings(cc="bbr", tcp_wmem_max=64 << 20, tcp_rmem_max=64 << 20)


def scheme(name: str, **settings: object) -> Scheme:
    return Scheme(name=name, config=ReplicatorConfig(name=name, **settings))


def test_a_configuration_is_its_round_trips_and_the_hosts_time_and_grows_with_the_peers() -> None:
    assert configure_time_s(0.0, 2) == pytest.approx(CONFIGURE_SOFTWARE_S + CONFIGURE_SOFTWARE_PER_PEER_S)
    round_trips = CONFIGURE_ROUND_TRIPS + 3 * CONFIGURE_ROUND_TRIPS_PER_PEER
    assert configure_time_s(0.01, 4) - configure_time_s(0.0, 4) == pytest.approx(round_trips * 0.02)
    assert configure_time_s(0.01, 6) > configure_time_s(0.01, 4) > configure_time_s(0.01, 2)


def test_the_first_call_on_fresh_connections_costs_more_the_longer_the_round_trip() -> None:
    costs = [fresh_call_s(scheme("full"), SHAPES, 4, 100e6, d, TCP, Framing()) for d in (0.0, 0.005, 0.01, 0.025)]
    assert costs[0] == pytest.approx(0.0, abs=1e-3)
    assert costs == sorted(costs) and costs[-1] > 0.1


def test_a_per_step_quorum_configures_behind_the_step_s_compute_and_an_outer_sync_s_does_not() -> None:
    full, diloco = scheme("full"), scheme("diloco", sync_every=4)
    for found, hides in ((full, True), (diloco, False)):
        bare = reform_time_s(found, SHAPES, 4, 100e6, 0.01, tcp=TCP)
        behind = reform_time_s(found, SHAPES, 4, 100e6, 0.01, compute_s=0.04, tcp=TCP)
        assert bare - behind == pytest.approx(0.04 if hides else 0.0)


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError):
        reform_time_s(scheme("full"), SHAPES, 4, 100e6, -0.01)
