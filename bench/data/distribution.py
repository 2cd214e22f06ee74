"""A document-length distribution: inclusive length bins with a count per bin, and its CSV form.

The CSV format is the one of the reference distribution (``distributions/default.csv``)::

    range,number,percentage(%),cumulative-percentage(%)
    "[0, 10]",30254,0.22,0.22
    "[11, 50]",391188,2.91,3.13

``range`` is an inclusive ``[low, high]`` bin of document lengths (in tokens) and ``number`` the count
of documents in it. The two percentage columns are derived from ``number``: they are written for
people reading the file, and ignored on reading.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["LengthDistribution", "load_distribution", "save_distribution", "distribution_names"]

_RANGE_RE = re.compile(r"^\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*$")
_HEADER = ["range", "number", "percentage(%)", "cumulative-percentage(%)"]


@dataclass(frozen=True)
class LengthDistribution:
    """Counts of documents per inclusive length bin.

    Attributes:
        bins: ``((low, high), ...)``, inclusive on both ends, sorted, non-overlapping (gaps allowed).
        counts: ``(count, ...)``, one non-negative int per bin; at least one is positive.

    A bin may start at 0 (the reference one does) but must reach at least length 1: samplers draw
    lengths >= 1, since a document of length 0 has no tokens.

    Raises:
        ValueError: on any violation of the above, naming the offending bin.
    """

    bins: tuple[tuple[int, int], ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        # Normalise lists to tuples so the dataclass stays hashable and immutable.
        object.__setattr__(self, "bins", tuple((int(lo), int(hi)) for lo, hi in self.bins))
        object.__setattr__(self, "counts", tuple(int(c) for c in self.counts))
        if len(self.bins) != len(self.counts):
            raise ValueError(f"{len(self.bins)} bins but {len(self.counts)} counts")
        if not self.bins:
            raise ValueError("a LengthDistribution needs at least one bin")
        prev_high = -1
        for (low, high), count in zip(self.bins, self.counts):
            if low < 0 or high < max(low, 1):
                raise ValueError(f"bin [{low}, {high}] must have 0 <= low <= high and high >= 1")
            if low <= prev_high:
                raise ValueError(f"bin [{low}, {high}] overlaps or precedes the bin ending at {prev_high}")
            if count < 0:
                raise ValueError(f"bin [{low}, {high}] has a negative count {count}")
            prev_high = high
        if sum(self.counts) == 0:
            raise ValueError("every bin count is 0; the distribution is empty")

    @property
    def total(self) -> int:
        """Number of documents counted over all bins."""
        return sum(self.counts)

    @property
    def probs(self) -> tuple[float, ...]:
        """Probability of each bin (counts / total)."""
        total = self.total
        return tuple(c / total for c in self.counts)

    @property
    def max_len(self) -> int:
        """Longest document length the bins allow."""
        return self.bins[-1][1]

    def bin_index(self, length: int) -> int:
        """Index of the bin holding ``length``; ValueError if no bin does."""
        for i, (low, high) in enumerate(self.bins):
            if low <= length <= high:
                return i
        raise ValueError(f"length {length} falls in no bin (bins span {self.bins[0][0]}..{self.max_len})")


def distribution_names() -> list[str]:
    """Names of the distributions shipped in ``bench/data/distributions/`` (without ``.csv``)."""
    folder = resources.files("bench.data") / "distributions"
    return sorted(p.name[: -len(".csv")] for p in folder.iterdir() if p.name.endswith(".csv"))


def _resolve(name_or_path: str | Path) -> Path:
    text = str(name_or_path)
    # A bare name (no separator, no suffix) means a shipped distribution; anything else is a path.
    if "/" not in text and "\\" not in text and not text.endswith(".csv"):
        path = Path(str(resources.files("bench.data") / "distributions" / f"{text}.csv"))
        if not path.is_file():
            raise ValueError(f"no shipped distribution named {text!r} ({path} is missing); "
                             f"available: {distribution_names()}")
        return path
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"distribution file {path} does not exist")
    return path


def load_distribution(name_or_path: str | Path = "default") -> LengthDistribution:
    """Read a distribution CSV.

    Args:
        name_or_path: a bare name such as ``"default"`` (looked up in the package's
            ``distributions/`` folder) or the path of a CSV file in the format of the module docstring.

    Returns:
        The LengthDistribution, bins in file order.

    Raises:
        ValueError: the file is missing, or malformed (missing column, unparsable range or count,
            invalid bins); the message names the file and the row.

    Example:
        >>> dist = load_distribution()
        >>> dist.bins[0], dist.counts[0]
        ((0, 10), 30254)
    """
    path = _resolve(name_or_path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        if "range" not in fields or "number" not in fields:
            raise ValueError(f"{path}: header {fields} lacks the 'range' and 'number' columns")
        bins, counts = [], []
        for line_no, row in enumerate(reader, start=2):
            match = _RANGE_RE.match(row["range"] or "")
            if match is None:
                raise ValueError(f"{path}, line {line_no}: range {row['range']!r} is not '[low, high]'")
            try:
                count = int(row["number"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}, line {line_no}: number {row['number']!r} is not an integer") from None
            bins.append((int(match[1]), int(match[2])))
            counts.append(count)
    try:
        return LengthDistribution(tuple(bins), tuple(counts))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def save_distribution(dist: LengthDistribution, path: str | Path) -> None:
    """Write ``dist`` as CSV in the format :func:`load_distribution` reads (percentages rounded to 2 places)."""
    total, cumulative = dist.total, 0
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_MINIMAL)
        writer.writerow(_HEADER)
        for (low, high), count in zip(dist.bins, dist.counts):
            cumulative += count
            writer.writerow([f"[{low}, {high}]", count, round(100 * count / total, 2),
                             round(100 * cumulative / total, 2)])
