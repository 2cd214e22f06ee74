"""Group collectives over all_to_all_v (NCCL or gloo): group_cast, group_reduce, hierarchical cast."""
from .all_to_all_v import all_to_all_v
from .args import GroupCollectiveArgs, ranges_to_index
from .group_cast import group_cast
from .group_reduce import group_reduce
from .hier_group_cast import hier_group_cast
from .hier_group_reduce import hier_group_reduce
from .range_ops import (range_add_, range_copy_stacked_, range_gather, range_gather_stacked,
                        range_scatter_add_)
from .work import WorkHandle

__all__ = ["GroupCollectiveArgs", "WorkHandle", "all_to_all_v", "group_cast", "group_reduce",
           "hier_group_cast", "hier_group_reduce", "range_add_", "range_copy_stacked_",
           "range_gather", "range_gather_stacked", "range_scatter_add_", "ranges_to_index"]
