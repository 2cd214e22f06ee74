"""Build a LengthDistribution from a local dataset: one length per record, counted into bins.

Reads jsonl/json, parquet, or a folder written by ``datasets.Dataset.save_to_disk`` (a Dataset or a
DatasetDict; all splits of a DatasetDict are counted together) with the ``datasets`` library.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.distribution import LengthDistribution, load_distribution

__all__ = ["build_distribution", "default_bins"]

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
_BATCH_ROWS = 1024


def default_bins(max_len: int) -> list[tuple[int, int]]:
    """The default distribution's bins, extended past its end until ``max_len`` is covered.

    Each extra bin doubles the upper edge, as the reference bins do from 1024 on:
    ``[196609, 393216]``, ``[393217, 786432]``, ...
    """
    bins = list(load_distribution("default").bins)
    while bins[-1][1] < max_len:
        high = bins[-1][1]
        bins.append((high + 1, 2 * high))
    return bins


def _load(path: Path, cache_dir: str | None) -> list[Any]:
    """The dataset(s) at ``path``: a list of ``datasets.Dataset``."""
    import datasets  # heavy import; only this entry point needs it

    if path.is_dir():
        try:
            loaded = datasets.load_from_disk(str(path))
        except FileNotFoundError as e:
            raise ValueError(f"{path} is a folder but not one written by save_to_disk: {e}") from None
        return list(loaded.values()) if isinstance(loaded, datasets.DatasetDict) else [loaded]
    if not path.is_file():
        raise ValueError(f"dataset path {path} does not exist")
    builder = _FILE_BUILDERS.get(path.suffix.lower())
    if builder is None:
        raise ValueError(f"{path}: unsupported suffix {path.suffix!r}; expected one of "
                         f"{sorted(_FILE_BUILDERS)} or a save_to_disk folder")
    import pyarrow

    try:
        return [datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir)]
    except (datasets.exceptions.DatasetsError, pyarrow.ArrowException) as e:
        raise ValueError(f"{path}: cannot be read as {builder}: {type(e).__name__}: {e}") from e


def _length_fn(by: str, tokenizer: Any) -> Callable[[str], int]:
    if by == "chars":
        if tokenizer is not None:
            raise ValueError("tokenizer is only used with by='tokens'")
        return len
    if by != "tokens":
        raise ValueError(f"by must be 'chars' or 'tokens', got {by!r}")
    if tokenizer is None:
        return lambda text: len(text.split())
    # HF tokenizers are callable too (returning a BatchEncoding), so .encode is checked first.
    if hasattr(tokenizer, "encode"):
        return lambda text: len(tokenizer.encode(text))
    if callable(tokenizer):
        return lambda text: len(tokenizer(text))
    raise ValueError(f"tokenizer must be callable or have .encode, got {type(tokenizer).__name__}")


def _measure(texts: Iterable[Any], length_of: Callable[[str], int]) -> np.ndarray:
    """Length of each text: int64 ``[num_records]``; a None text (a missing value) counts as 0."""
    out = []
    for i, text in enumerate(texts):
        if text is None:
            out.append(0)
        elif isinstance(text, str):
            out.append(length_of(text))
        else:
            raise ValueError(f"record {i}: expected a str, got {type(text).__name__}")
    return np.asarray(out, dtype=np.int64)


def _count(lengths: np.ndarray, bins: Sequence[tuple[int, int]]) -> list[int]:
    counts = []
    covered = np.zeros(len(lengths), dtype=bool)
    for low, high in bins:
        inside = (lengths >= low) & (lengths <= high)
        covered |= inside
        counts.append(int(inside.sum()))
    if not covered.all():
        outside = sorted(set(lengths[~covered].tolist()))
        raise ValueError(f"{int((~covered).sum())} records have lengths in no bin, e.g. {outside[:5]}")
    return counts


def build_distribution(path: str | Path, field: str, by: str = "chars", tokenizer: Any = None,
                       bins: Sequence[tuple[int, int]] | None = None,
                       cache_dir: str | None = None) -> LengthDistribution:
    """Measure ``field`` of every record of a local dataset and count the lengths into bins.

    Args:
        path: a ``.jsonl``/``.json`` or ``.parquet`` file, or a ``save_to_disk`` folder.
        field: the text column to measure.
        by: ``"chars"`` (len of the string) or ``"tokens"``.
        tokenizer: for ``by="tokens"``: None (whitespace split), an object with ``.encode(text)``
            (e.g. a HF tokenizer), or a callable ``text -> sequence of tokens``.
        bins: inclusive ``(low, high)`` bins; default :func:`default_bins` of the longest record.
        cache_dir: where ``datasets`` writes its Arrow cache for json/parquet (its default if None).

    Returns:
        The LengthDistribution over ``bins``, zero-count bins kept.

    Raises:
        ValueError: missing or unreadable path, unknown ``field`` (the message lists the fields),
            a non-text field, lengths outside the given bins, or an empty dataset.

    Example:
        >>> dist = build_distribution("docs.jsonl", field="text", by="tokens")  # doctest: +SKIP
    """
    path = Path(path)
    length_of = _length_fn(by, tokenizer)  # checked before the slow load
    parts = []
    for ds in _load(path, cache_dir):
        if field not in ds.column_names:
            raise ValueError(f"{path}: unknown field {field!r}; available fields: {ds.column_names}")
        texts = (text for batch in ds.select_columns([field]).iter(batch_size=_BATCH_ROWS)
                 for text in batch[field])
        try:
            parts.append(_measure(texts, length_of))
        except ValueError as e:
            raise ValueError(f"{path}, field {field!r}: {e}") from None
    lengths = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if lengths.size == 0:
        raise ValueError(f"{path}: the dataset has no records")
    bins = list(bins) if bins is not None else default_bins(int(lengths.max()))
    try:
        return LengthDistribution(tuple(bins), tuple(_count(lengths, bins)))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
