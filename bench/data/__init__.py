"""Document-length data: distributions (CSV), the pack-and-cap sampler, and dataset -> distribution.

Typical use by a mask generator::

    from bench.data import sample_doc_lens
    doc_lens = sample_doc_lens(seqlen=8192, seed=0)  # sums to 8192, each <= 8192 // 4

The packing and capping rules are in :mod:`bench.data.sampler`.
"""
from bench.data.dataset_lengths import build_distribution, default_bins
from bench.data.distribution import LengthDistribution, distribution_names, load_distribution, save_distribution
from bench.data.sampler import sample_doc_lens, sample_documents, sample_packs

__all__ = [
    "LengthDistribution",
    "load_distribution",
    "save_distribution",
    "distribution_names",
    "sample_documents",
    "sample_packs",
    "sample_doc_lens",
    "build_distribution",
    "default_bins",
]
