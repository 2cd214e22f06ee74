"""The link model: per-class times of point-to-point messages and collectives."""
from __future__ import annotations

import pytest

from bench.cp.predict.links import NETWORK, NVLINK, LinkModel, Topology

LINKS = LinkModel(nvlink_gb_per_s=400.0, network_gb_per_s=50.0, nvlink_latency_us=10.0,
                  network_latency_us=20.0)
GB = 1e9


def test_a_message_is_latency_plus_bytes_over_bandwidth():
    assert LINKS.transfer_us(GB, NVLINK) == pytest.approx(10.0 + 1e6 / 400.0)
    assert LINKS.transfer_us(GB, NETWORK) == pytest.approx(20.0 + 1e6 / 50.0)
    assert LINKS.transfer_us(0, NETWORK) == 0.0  # nothing moves: no latency either


def test_ranks_share_a_node_in_blocks_of_gpus_per_node():
    topo = Topology(gpus_per_node=8)
    assert topo.link(0, 7) == NVLINK and topo.link(7, 8) == NETWORK and topo.link(9, 15) == NVLINK
    assert not topo.spans_nodes(range(8)) and topo.spans_nodes([3, 8])
    assert topo.p2p_us(LINKS, 7, 8, GB) == LINKS.transfer_us(GB, NETWORK)


def test_all_to_all_ends_with_its_busiest_rank_and_link_class():
    topo = Topology(gpus_per_node=2)
    # rank 0 sends 1 GB to its node peer and 0.1 GB off the node; rank 3 receives 0.3 GB
    # over the network from ranks 0 and 1 (0.1 + 0.2): its network side is the slowest part
    sent = {0: {1: GB, 3: 0.1 * GB}, 1: {3: 0.2 * GB}, 2: {}, 3: {}}
    network = LINKS.transfer_us(0.3 * GB, NETWORK)
    assert topo.all_to_all_us(LINKS, sent) == pytest.approx(max(network,
                                                                LINKS.transfer_us(GB, NVLINK)))
    # both classes move in parallel: the slower one, not their sum
    assert topo.all_to_all_us(LINKS, sent) < network + LINKS.transfer_us(GB, NVLINK)


def test_ring_collectives_move_n_minus_1_blocks_through_the_slowest_class():
    topo = Topology(gpus_per_node=8)
    assert topo.ring_collective_us(LINKS, range(4), GB) == pytest.approx(
        LINKS.transfer_us(3 * GB, NVLINK))
    assert topo.ring_collective_us(LINKS, range(16), GB) == pytest.approx(
        LINKS.transfer_us(15 * GB, NETWORK))
    assert topo.ring_collective_us(LINKS, [5], GB) == 0.0


@pytest.mark.parametrize("field", ["nvlink_gb_per_s", "network_gb_per_s"])
def test_a_bandwidth_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        LinkModel(**{field: 0.0})


def test_latency_must_not_be_negative_and_nodes_hold_a_gpu():
    with pytest.raises(ValueError, match="network_latency_us"):
        LinkModel(network_latency_us=-1.0)
    with pytest.raises(ValueError, match="gpus_per_node"):
        Topology(gpus_per_node=0)
