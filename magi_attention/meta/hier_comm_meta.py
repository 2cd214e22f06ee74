"""Hierarchical (2D mesh) comm meta: one stage's group_cast as two hops, inter-node then intra-node.

Mesh ``(num_nodes, ranks_per_node)``; cp rank ``r = node * ranks_per_node + local``. Hop 1 (the
inter group of ranks sharing ``local``) sends from src ``(i_s, j_s)`` to the relay ``(i_d, j_s)``
of each destination node the union of what any rank of that node needs from src, once, instead
of once per destination rank. Hop 2 (the intra group of node i_d) forwards from each relay to
each destination the ranges it needs. A final row permutation gives the flat group_cast layout
(sources in cp-rank order), so the stage slices of the flat meta apply unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..comm.args import GroupCollectiveArgs, ranges_to_index
from .comm_meta import TransferTable, merge_ranges, to_local
from .dispatch import DispatchMeta


@dataclass(frozen=True)
class HierCastArgs:
    """hop1: over the inter group, from the local shard; hop2: over the intra group, from the
    hop-1 received buffer; post_index: flat-layout row i is hop-2 received row post_index[i]."""

    hop1: GroupCollectiveArgs
    hop2: GroupCollectiveArgs
    post_index: np.ndarray
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def post_index_tensor(self, device) -> torch.Tensor:
        key = ("post", str(device))
        if key not in self._cache:
            self._cache[key] = torch.from_numpy(self.post_index).to(device)
        return self._cache[key]

    def inverse_post_index_tensor(self, device) -> torch.Tensor:
        key = ("inv", str(device))
        if key not in self._cache:
            self._cache[key] = torch.from_numpy(np.argsort(self.post_index)).to(device)
        return self._cache[key]


def _rows(table: TransferTable, stage: int, **eq) -> np.ndarray:
    keep = table.stage == stage
    for col, value in eq.items():
        keep &= getattr(table, col) == value
    return np.flatnonzero(keep)


def _payload(table: TransferTable, stage: int, src: int, node: int, per_node: int):
    """Merged global ranges src sends (once) to node in hop 1, sorted."""
    rows = _rows(table, stage, src=src)
    rows = rows[table.dst[rows] // per_node == node]
    _, start, end = merge_ranges(np.zeros(len(rows), dtype=np.int64), table.start[rows],
                                 table.end[rows])
    return start, end


def build_hier_cast_args(table: TransferTable, dispatch: DispatchMeta, rank: int, stage: int,
                         mesh_shape: tuple[int, int]) -> HierCastArgs:
    num_nodes, per_node = mesh_shape
    if num_nodes * per_node != table.cp_size:
        raise ValueError(f"mesh {mesh_shape} does not cover cp_size={table.cp_size}")
    node, local = divmod(rank, per_node)
    # hop 1: me -> relay (i_d, local) for every node i_d
    send, send_sizes = [], []
    for i_d in range(num_nodes):
        start, end = _payload(table, stage, rank, i_d, per_node)
        lo = to_local(start, dispatch)
        send.append(np.stack([lo, lo + end - start], axis=1))
        send_sizes.append(int((end - start).sum()))
    # what I receive as relay: from (i_s, local) the payload for my node, in i_s order
    relay_runs, recv_sizes, offset = [], [], 0
    for i_s in range(num_nodes):
        start, end = _payload(table, stage, i_s * per_node + local, node, per_node)
        relay_runs.append((i_s * per_node + local, start, end, offset + np.cumsum(end - start)
                           - (end - start)))
        recv_sizes.append(int((end - start).sum()))
        offset += recv_sizes[-1]
    hop1 = GroupCollectiveArgs(np.concatenate(send).reshape(-1, 2), tuple(send_sizes),
                               tuple(recv_sizes))
    # hop 2: as relay, forward to each (node, j_d) its rows from every (i_s, local)
    send2, send2_sizes = [], []
    for j_d in range(per_node):
        dst = node * per_node + j_d
        size = 0
        for src, p_start, p_end, p_off in relay_runs:
            rows = _rows(table, stage, dst=dst, src=src)
            at = np.searchsorted(p_end, table.start[rows], side="right")
            pos = p_off[at] + table.start[rows] - p_start[at]
            send2.append(np.stack([pos, pos + table.lengths[rows]], axis=1))
            size += int(table.lengths[rows].sum())
        send2_sizes.append(size)
    # hop-2 layout at me: by relay j_s, then i_s; flat layout: by src cp rank (i_s, j_s)
    hop2_pos, recv2_sizes, offset = {}, [], 0
    for j_s in range(per_node):
        size = 0
        for i_s in range(num_nodes):
            src = i_s * per_node + j_s
            rows = _rows(table, stage, dst=rank, src=src)
            n = int(table.lengths[rows].sum())
            hop2_pos[src] = (offset + size, n)
            size += n
        recv2_sizes.append(size)
        offset += size
    flat_ranges = [(hop2_pos[src][0], hop2_pos[src][0] + hop2_pos[src][1])
                   for src in range(table.cp_size)]
    hop2 = GroupCollectiveArgs(np.concatenate(send2).reshape(-1, 2), tuple(send2_sizes),
                               tuple(recv2_sizes))
    return HierCastArgs(hop1, hop2, ranges_to_index(np.array(flat_ranges, dtype=np.int64)))
