"""scripts/dev/rank_mask_probe.py (a GPU probe): its CPU parts, the synthetic masks it times and
the variants it names."""
import inspect

import pytest

from magi_attention.common import union_area
from magi_attention.kernels.triton import gluon_backward, gluon_forward


@pytest.fixture(scope="module")
def probe(load_script):
    return load_script("scripts/dev/rank_mask_probe.py")


@pytest.mark.parametrize("doc_len, seqlen", [(1024, 4096), (3000, 8192), (4096, 4096)])
def test_equal_documents_tile_the_sequence_once(probe, doc_len, seqlen):
    causal = probe.equal_docs(doc_len, seqlen, "causal")
    full = probe.equal_docs(doc_len, seqlen, "full")
    lens = [s.q_range.end - s.q_range.start for s in full]
    assert sum(lens) == seqlen and all(n == doc_len for n in lens[:-1]) and lens[-1] <= doc_len
    assert union_area(full) == sum(n * n for n in lens)
    assert union_area(causal) == sum(n * (n + 1) // 2 for n in lens)


def test_every_variant_passes_keywords_its_launcher_takes(probe):
    params = {"fwd": inspect.signature(gluon_forward.launch_fwd).parameters,
              "bwd": inspect.signature(gluon_backward.launch_bwd).parameters}
    for name, (direction, keywords, _) in probe.TRITON_VARIANTS.items():
        assert set(keywords) <= set(params[direction]), name


@pytest.mark.parametrize("rows, head", [(1024, 0), (1024, 512), (2048, 4096)])
def test_a_tail_mask_is_a_head_rectangle_and_a_causal_tail(probe, rows, head):
    mask = probe.tail_mask(rows, head)
    assert union_area(mask) == rows * head + rows * (rows + 1) // 2
    assert max(s.k_range.end for s in mask) == head + rows


def test_heads_option_parses_gqa_counts_and_refuses_the_rest(probe):
    """--heads Q:KV (Ulysses' cp 4 rank is 16:2): the default is the bench's 64:8; a count that
    is missing, not a number or not a divisor is an argparse error naming the value."""
    import argparse
    assert probe._heads("16:2") == (16, 2) and (probe.HQ, probe.HKV) == (64, 8)
    for bad, why in (("64", "want q heads:kv heads"), ("x:1", "want q heads:kv heads"),
                     ("64:7", "must divide"), ("0:1", "must divide")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            probe._heads(bad)
