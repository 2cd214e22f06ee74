"""Small-S versions of the MASKS.md defaults, so windows, blocks and buckets bite at S ~ 250."""

SMALL_MASK_PARAMS = {
    "sliding_window": {"window": 24}, "sliding_window_causal": {"window": 24},
    "global_sliding_window": {"window": 24, "num_global": 8},
    "block_causal_document": {"block_size": 16}, "hash_sparse": {"run_len": 8, "num_buckets": 4},
    "block_sparse": {"block_q": 32, "block_k": 32},
    "var_block_sparse": {"min_block": 16, "max_block": 64},
}
