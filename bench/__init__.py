"""The benchmark suite: masks, data, kernel adapters, CP strategies, runners, reports and plots."""
