"""The cp process groups of a key: a flat group, and for a 2D mesh the inter / intra groups."""
from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist


@dataclass(frozen=True)
class CpGroups:
    cp_group: object            # flat group over all cp ranks (None: the default group)
    cp_size: int
    cp_rank: int
    inter_group: object = None  # 2D mesh only: ranks with the same intra index (across nodes)
    intra_group: object = None  # 2D mesh only: ranks of the same node
    mesh_shape: tuple[int, int] | None = None

    @property
    def hierarchical(self) -> bool:
        return self.inter_group is not None


def resolve_cp_groups(cp_group_or_mesh, hierarchical: bool | None) -> CpGroups:
    if not dist.is_initialized():
        raise ValueError("torch.distributed is not initialised: call init_process_group first")
    from torch.distributed.device_mesh import DeviceMesh
    if not isinstance(cp_group_or_mesh, DeviceMesh):
        if hierarchical:
            raise ValueError("hierarchical=True needs a 2D DeviceMesh (inter x intra)")
        group = cp_group_or_mesh
        return CpGroups(group, dist.get_world_size(group), dist.get_rank(group))
    mesh = cp_group_or_mesh
    ranks = mesh.mesh.flatten().tolist()
    if ranks != sorted(ranks):
        raise ValueError(f"mesh ranks must increase in row-major order, got {ranks}")
    flat = None if len(ranks) == dist.get_world_size() else dist.new_group(ranks)
    cp_rank = ranks.index(dist.get_rank())
    if mesh.ndim == 1 or hierarchical is False:
        return CpGroups(flat, len(ranks), cp_rank)
    if mesh.ndim != 2:
        raise ValueError(f"cp mesh must be 1D or 2D (inter x intra), got {mesh.ndim}D")
    return CpGroups(flat, len(ranks), cp_rank, mesh.get_group(0), mesh.get_group(1),
                    tuple(mesh.mesh.shape))
