"""Which directions of the fused stage run cut by keys (magi_attention.api._tune_cut): the
fixed choices, where nothing is cut whatever was asked, and the timed rule (the timing itself
runs on the GPU machine: tests/magi_attention/api/test_magi_attn_nccl.py, mode cut_auto)."""
from types import SimpleNamespace

import pytest
import torch

from magi_attention.api._tune_cut import MIN_GAIN, choose_cut, resolve_cut
from magi_attention.meta import OverlapConfig


def _runtime(fused: bool):
    return SimpleNamespace(meta=SimpleNamespace(fused=object() if fused else None))


def _resolve(overlap, fused=True, device="cpu"):
    return resolve_cut(overlap, _runtime(fused), torch.device(device), 4, 2, 16, torch.float32)


@pytest.mark.parametrize("cut,want", [("none", set()), ("fwd", {"fwd"}), ("bwd", {"bwd"}),
                                      ("both", {"fwd", "bwd"})])
def test_fixed_choices(cut, want):
    assert _resolve(OverlapConfig(cut=cut)) == want


def test_auto_cuts_nothing_on_cpu():
    assert _resolve(OverlapConfig()) == set()


@pytest.mark.parametrize("overlap,fused", [(OverlapConfig(cut="both"), False),
                                           (OverlapConfig(cut="both", split=True), True)])
def test_nothing_cut_without_a_whole_fused_stage(overlap, fused):
    assert _resolve(overlap, fused=fused) == set()


def test_timed_rule_keeps_whole_within_noise():
    slower, faster = 1.0, 1.0 - 2 * MIN_GAIN
    assert choose_cut({"fwd": (1.0, faster), "bwd": (1.0, 1.0 - MIN_GAIN / 2)}) == {"fwd"}
    assert choose_cut({"fwd": (1.0, slower), "bwd": (1.0, faster)}) == {"bwd"}


def test_unknown_cut_is_a_value_error():
    with pytest.raises(ValueError, match="cut must be one of"):
        OverlapConfig(cut="sideways")
