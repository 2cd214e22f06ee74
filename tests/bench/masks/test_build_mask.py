"""build_mask rejects bad requests with a ValueError naming the problem."""
import pytest

from bench.masks import build_mask


@pytest.mark.parametrize("call,match", [
    (lambda: build_mask("causual", 64), "unknown mask 'causual'.*causal"),
    (lambda: build_mask("sliding_window", 64, window=-1), "window must be an int >= 0, got -1"),
    (lambda: build_mask("sliding_window", 64, windw=3), r"unknown parameter\(s\) \['windw'\]"),
    (lambda: build_mask("causal", 64, window=3), r"unknown parameter\(s\) \['window'\]"),
    (lambda: build_mask("causal_document", 64, doc_lens=[30, 30]), "sum to 60, but seqlen=64"),
    (lambda: build_mask("causal_document", 64), "needs doc_lens"),
    (lambda: build_mask("causal_document", 64, doc_lens=[64, 0]), "doc_lens must be"),
    (lambda: build_mask("prefix_lm_document", 64, doc_lens=[16, 48], prefix_len=17),
     r"prefix_len must be an int in \[0, 16\].*shortest document.*got 17"),
    (lambda: build_mask("prefix_lm_causal", 64, prefix_len=65), r"prefix_len .*\[0, 64\]"),
    (lambda: build_mask("block_causal_document", 64, doc_lens=[64], block_size=0), "block_size"),
    (lambda: build_mask("block_sparse", 64, block_q=0), "block_q must be an int >= 1, got 0"),
    (lambda: build_mask("block_sparse", 64, sparsity=0.0), r"sparsity must be a number in \(0"),
    (lambda: build_mask("block_sparse", 64, sparsity=1.5), "sparsity .* got 1.5"),
    (lambda: build_mask("qk_sparse", 64, drop_ratio=1.2), "drop_ratio .* got 1.2"),
    (lambda: build_mask("var_block_sparse", 64, min_block=64, max_block=100), "max_block=100"),
    (lambda: build_mask("hash_sparse", 1 << 20, run_len=16), "run_len=16 gives 65536 runs"),
    (lambda: build_mask("block_sparse", 1 << 20), "block_q=64, block_k=64 give"),
    (lambda: build_mask("causal", 0), "seqlen must be an int >= 1, got 0"),
    (lambda: build_mask("causal", 64, seed=-1), "seed must be an int >= 0"),
], ids=["unknown_name", "negative_window", "unknown_param", "param_of_other_mask",
        "doc_lens_sum", "doc_lens_missing", "empty_doc", "prefix_too_long_doc",
        "prefix_too_long", "block_size_zero", "block_q_zero", "sparsity_zero", "sparsity_big",
        "drop_ratio_big", "max_block_not_multiple", "hash_too_many_runs", "block_grid_too_big",
        "seqlen_zero", "seed_negative"])
def test_bad_request_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
