"""A shaper serves pure ACKs ahead of queued bulk data, only them, and only when the cluster asks for it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess

import pytest
from acks_traffic import SINK_PORT, acked_round_trip_ms, flood, while_flooded

from netbench.emulation import acksfirst
from netbench.emulation.capabilities import detect
from netbench.emulation.cluster import Cluster
from netbench.emulation.probe import measure_rtt
from netbench.emulation.shaping import TbfParams
from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.run.fidelity import qdisc_stats
from netbench.schedule.live import _change_rates

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

RATE_BPS = 10e6  # at 10mbit tbf's queue of 1010 frames holds 1.2 s of data


def _cluster(acks_first: bool) -> Cluster:
    capabilities = dataclasses.replace(detect(), acks_first=acks_first)
    link = DirectionSpec(rate_bps=RATE_BPS)
    return Cluster(ClusterSpec(nodes=2, up=link, down=link), capabilities=capabilities)


@pytest.mark.parametrize("acks_first", [True, False])
def test_a_flow_whose_acks_cross_a_full_queue_waits_for_them_only_without_acks_first(acks_first: bool) -> None:
    with _cluster(acks_first) as cluster:
        rtt_ms = acked_round_trip_ms(*cluster.nodes)  # the second node sends to the first, whose uplink is full
    if acks_first:
        assert rtt_ms < 400
    else:
        assert rtt_ms > 900  # the ACKs wait behind 1.2 s of the other direction's data


def test_small_datagrams_wait_their_turn() -> None:
    """Only pure ACKs jump the queue: a small data packet overtaking its flow's full ones would reorder the flow."""
    with _cluster(acks_first=True) as cluster:
        rtt = while_flooded(
            *cluster.nodes, 7.0, lambda flooded, other: measure_rtt(flooded, other, count=3, interval_s=0.05)
        )
    assert all(sample > 500 for sample in rtt["samples"])  # each waited behind the queue or was dropped at its tail


def test_the_fidelity_counters_count_each_packet_once() -> None:
    with _cluster(acks_first=True) as cluster:
        sender, receiver = cluster.nodes
        sender.call(flood, receiver.address, 0.3)
        shaped = json.loads(subprocess.run(["tc", "-n", sender.netns, "-s", "-j", "qdisc", "show", "dev", "eth0"],
                                           capture_output=True, text=True, check=True).stdout)  # fmt: skip
        tbf = next(q for q in shaped if q["kind"] == "tbf")
        assert any(q.get("handle") == acksfirst.ROOT for q in shaped)
        counted = qdisc_stats([sender.netns])
    assert 0 < tbf["packets"] <= counted["packets"] < 2 * tbf["packets"] + 10  # the tree's htb is not added
    assert counted["drops"] < 2 * tbf["drops"] + 10


def _bands(node) -> dict[str, tuple[int, int]]:  # noqa: ANN001 - a cluster's node
    """(bytes, packets) each band of the node's uplink tree has sent."""
    out = node.run(["tc", "-s", "class", "show", "dev", node.iface]).stdout  # tc prints no JSON for classes
    found = re.findall(r"class htb (\S+) .*\n Sent (\d+) bytes (\d+) pkt", out)
    return {handle: (int(sent), int(packets)) for handle, sent, packets in found}


def test_only_pure_acks_take_the_first_band() -> None:
    with _cluster(acks_first=True) as cluster:
        sender, receiver = cluster.nodes
        sink = receiver.python("netbench.emulation.traffic", "tcp-sink", str(SINK_PORT), "30", stdout=subprocess.PIPE)
        sink.stdout.readline()  # listening
        sender.run_python("netbench.emulation.traffic", "tcp-source", receiver.address, str(SINK_PORT), "1")
        sink.wait(timeout=30)
        sent, acked = _bands(sender), _bands(receiver)
    ack_band, bulk_band = f"{acksfirst.ROOT}{acksfirst.ACK_BAND}", f"{acksfirst.ROOT}{acksfirst.BULK_BAND}"
    assert sent[bulk_band][0] > 500_000  # a second of 10mbit went out as data
    assert acked[ack_band][1] > 100  # the receiver's ACKs took the first band
    for band in (sent[ack_band], acked[ack_band]):  # and nothing as large as a data segment did
        assert band[0] <= band[1] * acksfirst.PURE_ACK_MAX_BYTES


def test_a_rate_changed_in_place_resizes_both_bands() -> None:
    with _cluster(acks_first=True) as cluster:
        node = cluster.nodes[0]
        node.call(_change_rates, [(node.iface, 1e9)], False)
        shown = node.run(["tc", "qdisc", "show", "dev", node.iface]).stdout
    frames = TbfParams.for_rate(1e9, False).limit_frames
    assert frames > 1010  # 100 ms of 1gbit holds more than the 10mbit queue's frames
    assert re.findall(r"qdisc pfifo \S+ parent 20:\d limit (\d+)p", shown) == [str(frames)] * 2
