"""The link model: how long bytes take between GPUs, inside a node and across nodes.

Ranks ``0 .. cp_size - 1`` sit ``gpus_per_node`` to a node, in order (rank r on node
``r // gpus_per_node``), as torchrun places them. A pair of ranks talks over NVLink (through
the node's NVSwitch) or over the network (each GPU its own NIC, as on H100/H200 nodes with
8 x 400 Gb/s); every GPU has its own bandwidth per link class and direction, full duplex.

Times are latency + bytes / bandwidth, per collective as NCCL runs it:

- point to point (a ring step): the pair's link class;
- all-to-all (Ulysses, MagiAttention's group-cast and group-reduce, both one all_to_all_v):
  every pair at once; a rank's NVLink and network traffic move in parallel, each bounded by
  the larger of what the rank sends and receives on that class; the collective ends with the
  busiest rank;
- all-gather and reduce-scatter (ring algorithms): each rank moves (n - 1) blocks through the
  slowest class its group spans (``busbw``: the network as soon as the group leaves a node).

Bandwidths are effective (what NCCL reaches), not the links' nominal rates; the defaults
(``LinkModel()``) are those of an H100/H200 node: NVLink 4 (450 GB/s per GPU and direction
nominal) at ~80%, a 400 Gb/s NIC per GPU (50 GB/s) at ~90%.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["NVLINK", "NETWORK", "LINK_CLASSES", "LinkModel", "Topology"]

NVLINK, NETWORK = "nvlink", "network"
LINK_CLASSES = (NVLINK, NETWORK)


@dataclass(frozen=True)
class LinkModel:
    """Effective per-GPU bandwidth (GB/s, one direction) and latency (us) per link class."""

    nvlink_gb_per_s: float = 360.0
    network_gb_per_s: float = 45.0
    nvlink_latency_us: float = 10.0
    network_latency_us: float = 20.0

    def __post_init__(self) -> None:
        for name in ("nvlink_gb_per_s", "network_gb_per_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"links.{name} must be > 0, got {getattr(self, name)}")
        for name in ("nvlink_latency_us", "network_latency_us"):
            if getattr(self, name) < 0:
                raise ValueError(f"links.{name} must be >= 0, got {getattr(self, name)}")

    def bandwidth(self, link: str) -> float:
        """Bytes per microsecond of ``link``."""
        return (self.nvlink_gb_per_s if link == NVLINK else self.network_gb_per_s) * 1e3

    def latency(self, link: str) -> float:
        return self.nvlink_latency_us if link == NVLINK else self.network_latency_us

    def transfer_us(self, nbytes: float, link: str) -> float:
        """One message of ``nbytes`` over ``link`` (0 bytes: nothing moves, no latency)."""
        return self.latency(link) + nbytes / self.bandwidth(link) if nbytes > 0 else 0.0


@dataclass(frozen=True)
class Topology:
    """Which link joins two ranks: ``gpus_per_node`` consecutive ranks share a node."""

    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")

    def node(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def link(self, a: int, b: int) -> str:
        return NVLINK if self.node(a) == self.node(b) else NETWORK

    def spans_nodes(self, ranks: Sequence[int]) -> bool:
        return len({self.node(r) for r in ranks}) > 1

    def p2p_us(self, links: LinkModel, src: int, dst: int, nbytes: float) -> float:
        return links.transfer_us(nbytes, self.link(src, dst))

    def all_to_all_us(self, links: LinkModel, sent: Mapping[int, Mapping[int, float]]) -> float:
        """``sent[src][dst]``: bytes each rank sends each other rank (src == dst ignored)."""
        out = {(r, c): 0.0 for r in sent for c in LINK_CLASSES}
        inn = dict(out)
        for src, row in sent.items():
            for dst, nbytes in row.items():
                if dst == src or nbytes <= 0:
                    continue
                link = self.link(src, dst)
                out[src, link] += nbytes
                inn[dst, link] = inn.get((dst, link), 0.0) + nbytes
        worst = 0.0
        for (rank, link), nbytes in out.items():
            worst = max(worst, links.transfer_us(max(nbytes, inn.get((rank, link), 0.0)), link))
        for (rank, link), nbytes in inn.items():
            worst = max(worst, links.transfer_us(nbytes, link))
        return worst

    def ring_collective_us(self, links: LinkModel, ranks: Sequence[int], block_bytes: float
                           ) -> float:
        """All-gather or reduce-scatter of ``block_bytes`` per rank over ``ranks``."""
        if len(ranks) < 2:
            return 0.0
        link = NETWORK if self.spans_nodes(ranks) else NVLINK
        return links.transfer_us((len(ranks) - 1) * block_bytes, link)
