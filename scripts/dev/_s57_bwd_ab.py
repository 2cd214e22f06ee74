"""Scratch (session 57, not committed): rank_mask_probe with the s56 backward beside the new one."""
import sys
from pathlib import Path
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
import rank_mask_probe as rmp  # noqa: E402
from magi_attention.kernels.triton import _gluon_backward_s56 as old  # noqa: E402
from magi_attention.kernels.triton import gluon_backward as new  # noqa: E402


class Shim:
    def __getattr__(self, name):
        return getattr(new, name)

    def launch_bwd(self, *a, impl="new", **kw):
        return (old if impl == "old" else new).launch_bwd(*a, **kw)


rmp.gluon_backward = Shim()
rmp.TRITON_VARIANTS.update({
    "bwd_s56": ("bwd", dict(impl="old"), False),
    "bwd_s56_again": ("bwd", dict(impl="old"), False),
})
rmp.main()
