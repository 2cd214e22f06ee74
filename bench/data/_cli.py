"""Command line of ``python -m bench.data.build_distribution``: dataset -> distribution CSV."""
from __future__ import annotations

import argparse
from typing import Any

from bench.data.dataset_lengths import build_distribution
from bench.data.distribution import save_distribution


def _load_tokenizer(name: str | None) -> Any:
    if name is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise SystemExit(f"--tokenizer {name} needs the transformers package: {e}") from None
    return AutoTokenizer.from_pretrained(name)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.data.build_distribution",
        description="Count the lengths of one text field of a local dataset (jsonl, parquet or a "
                    "save_to_disk folder) into length bins, and write them as a distribution CSV.")
    p.add_argument("--path", required=True, help="dataset file (.jsonl, .json, .parquet) or save_to_disk folder")
    p.add_argument("--field", required=True, help="text column to measure")
    p.add_argument("--by", choices=["chars", "tokens"], default="chars", help="length unit (default: chars)")
    p.add_argument("--tokenizer", default=None,
                   help="HF tokenizer name or folder for --by tokens (default: whitespace split)")
    p.add_argument("--out", required=True, help="CSV file to write")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, build and write the distribution; print one summary line. Returns 0."""
    args = _parser().parse_args(argv)
    if args.tokenizer is not None and args.by != "tokens":
        raise SystemExit("--tokenizer needs --by tokens")
    try:
        dist = build_distribution(args.path, args.field, by=args.by, tokenizer=_load_tokenizer(args.tokenizer))
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    save_distribution(dist, args.out)
    print(f"wrote {args.out}: {dist.total} records in {len(dist.bins)} bins, longest bin ends at {dist.max_len}")
    return 0
