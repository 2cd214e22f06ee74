"""Packing, capping, determinism and fidelity to the source distribution of bench/data/sampler.py."""
import numpy as np
import pytest
from scipy.stats import chisquare

from bench.data import (LengthDistribution, load_distribution, sample_doc_lens, sample_documents, sample_packs,
                        save_distribution)

NUM_DOCS = 10_000
P_MIN = 1e-3


def chi_square_p(lengths, dist: LengthDistribution) -> float:
    """p-value of the lengths' histogram over ``dist``'s bins against ``dist``'s bin probabilities."""
    observed = np.array([0] * len(dist.bins))
    for length in lengths:
        observed[dist.bin_index(length)] += 1
    expected = np.array(dist.probs) * len(lengths)
    return chisquare(observed, expected).pvalue


@pytest.mark.parametrize("seqlen, cap_ratio", [
    (1024, 0.25), (4096, 0.25), (65536, 0.25), (1000, 0.3), (8192, 0.1), (4096, 1.0), (7, 0.5),
])
def test_packs_sum_to_seqlen_and_respect_cap(seqlen, cap_ratio):
    cap = int(cap_ratio * seqlen)
    packs = sample_packs(seqlen, num_packs=20, seed=1, cap_ratio=cap_ratio)
    assert len(packs) == 20
    for pack in packs:
        assert sum(pack) == seqlen
        assert min(pack) >= 1
        assert max(pack) <= cap


def test_default_cap_binds_at_quarter_seqlen():
    # The default distribution has many docs longer than 1024, so a cap of 4096 // 4 must bind.
    lens = [d for pack in sample_packs(4096, num_packs=50, seed=0) for d in pack]
    assert max(lens) == 1024


def test_same_seed_same_packs_different_seed_different():
    assert sample_packs(8192, 8, seed=5) == sample_packs(8192, 8, seed=5)
    assert sample_packs(8192, 8, seed=5) != sample_packs(8192, 8, seed=6)
    assert sample_doc_lens(8192, seed=5) == sample_doc_lens(8192, seed=5)
    assert sample_doc_lens(8192, seed=5) != sample_doc_lens(8192, seed=6)
    assert sample_documents(100, seed=5) == sample_documents(100, seed=5)
    assert sample_documents(100, seed=5) != sample_documents(100, seed=6)


def test_doc_lens_is_first_pack_and_packs_do_not_depend_on_count():
    assert sample_doc_lens(4096, seed=2) == sample_packs(4096, 3, seed=2)[0]
    assert sample_packs(4096, 7, seed=2)[:3] == sample_packs(4096, 3, seed=2)


def test_cut_then_split_rule_on_a_fixed_length_distribution():
    # Every draw is 300: a pack of 1000 holds 300, 300, 300 and the cut 100; the cap of 250
    # then splits each 300 into 250 + 50 in place.
    dist = LengthDistribution(((300, 300),), (1,))
    assert sample_doc_lens(1000, distribution=dist, cap_ratio=0.25) == [250, 50, 250, 50, 250, 50, 100]


def test_distribution_given_as_path(tmp_path):
    path = tmp_path / "mine.csv"
    save_distribution(LengthDistribution(((5, 5),), (1,)), path)
    assert sample_doc_lens(20, distribution=str(path), cap_ratio=1.0) == [5, 5, 5, 5]


def test_sampled_documents_match_source_distribution():
    dist = load_distribution()
    lens = sample_documents(NUM_DOCS, seed=0)
    assert min(lens) >= 1 and max(lens) <= dist.max_len
    assert chi_square_p(lens, dist) > P_MIN


def test_chi_square_rejects_a_wrong_distribution():
    # Same bins, counts reversed: the test above must be able to fail.
    dist = load_distribution()
    wrong = LengthDistribution(dist.bins, dist.counts[::-1])
    assert chi_square_p(sample_documents(NUM_DOCS, seed=0, distribution=wrong), dist) < P_MIN
    # A subtler error: 20% of the mass of the [201, 500] bin moved to [501, 1024].
    counts = list(dist.counts)
    moved = counts[4] // 5
    counts[4] -= moved
    counts[5] += moved
    shifted = LengthDistribution(dist.bins, tuple(counts))
    assert chi_square_p(sample_documents(NUM_DOCS, seed=0, distribution=shifted), dist) < P_MIN


def test_packed_documents_match_source_distribution():
    # A cap that does not bind (cap_ratio 1 and packs longer than any document); each pack's cut
    # last document is left out, the whole draws before it are kept.
    dist = load_distribution()
    packs = sample_packs(2**23, num_packs=8, seed=0, cap_ratio=1.0)
    lens = [d for pack in packs for d in pack[:-1]]
    assert len(lens) > NUM_DOCS
    assert chi_square_p(lens[:NUM_DOCS], dist) > P_MIN


def test_lengths_are_uniform_within_a_bin():
    dist = LengthDistribution(((1, 10),), (1,))
    lens = sample_documents(NUM_DOCS, seed=0, distribution=dist)
    assert set(lens) == set(range(1, 11))
    assert chisquare(np.bincount(lens, minlength=11)[1:]).pvalue > P_MIN


@pytest.mark.parametrize("cap_ratio", [0, 1.5, -1, 0.0, 1.0001])
def test_bad_cap_ratio_raises(cap_ratio):
    with pytest.raises(ValueError, match="cap_ratio"):
        sample_packs(4096, 1, cap_ratio=cap_ratio)
    with pytest.raises(ValueError, match="cap_ratio"):
        sample_doc_lens(4096, cap_ratio=cap_ratio)


def test_cap_below_one_token_raises():
    with pytest.raises(ValueError, match="cap_ratio=0.25 with seqlen=3"):
        sample_doc_lens(3)


@pytest.mark.parametrize("kwargs, name", [
    (dict(seqlen=0, num_packs=1), "seqlen"),
    (dict(seqlen=-5, num_packs=1), "seqlen"),
    (dict(seqlen=4096, num_packs=0), "num_packs"),
    (dict(seqlen=4096, num_packs=1, seed=-1), "seed"),
])
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sample_packs(**kwargs)


def test_missing_distribution_file_raises(tmp_path):
    with pytest.raises(ValueError, match="missing.csv"):
        sample_doc_lens(4096, distribution=str(tmp_path / "missing.csv"))
