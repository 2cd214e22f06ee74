"""LengthDistribution validation and the CSV round trip of bench/data/distribution.py."""
from pathlib import Path

import pytest

from bench.data import LengthDistribution, distribution_names, load_distribution, save_distribution

REFERENCE_CSV = Path(__file__).parents[3] / "bench" / "data" / "distributions" / "default.csv"


def test_default_is_the_reference_table():
    dist = load_distribution()
    assert "default" in distribution_names()
    assert len(dist.bins) == 14
    assert dist.bins[0] == (0, 10) and dist.counts[0] == 30254
    assert dist.bins[-1] == (131073, 196608) and dist.counts[-1] == 18284
    assert dist.total == 13_463_214
    assert load_distribution(str(REFERENCE_CSV)) == dist


def test_save_then_load_round_trips_and_matches_reference_text(tmp_path):
    out = tmp_path / "copy.csv"
    save_distribution(load_distribution(), out)
    assert load_distribution(str(out)) == load_distribution()
    # Same header, bins and counts as the reference; percentages recomputed to the same 2 places.
    assert out.read_text().splitlines() == REFERENCE_CSV.read_text().splitlines()


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(ValueError, match="nope.csv.*does not exist"):
        load_distribution(str(tmp_path / "nope.csv"))


def test_unknown_shipped_name_lists_available():
    with pytest.raises(ValueError, match="no shipped distribution named 'nope'.*default"):
        load_distribution("nope")


@pytest.mark.parametrize("body, problem", [
    ("range,count\n\"[0, 10]\",3\n", "lacks the 'range' and 'number'"),
    ("range,number\n0-10,3\n", "line 2: range '0-10'"),
    ("range,number\n\"[0, 10]\",many\n", "line 2: number 'many'"),
    ("range,number\n\"[0, 10]\",3\n\"[5, 20]\",1\n", r"bin \[5, 20\] overlaps"),
    ("range,number\n\"[0, 10]\",-3\n", "negative count"),
    ("range,number\n\"[0, 10]\",0\n", "every bin count is 0"),
    ("range,number\n", "at least one bin"),
], ids=["missing-column", "bad-range", "bad-count", "overlap", "negative", "all-zero", "empty"])
def test_malformed_csv_names_file_and_problem(tmp_path, body, problem):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(ValueError, match=problem) as info:
        load_distribution(str(path))
    assert "bad.csv" in str(info.value)


@pytest.mark.parametrize("bins, counts, problem", [
    (((0, 0),), (5,), "high >= 1"),
    (((10, 5),), (5,), "low <= high"),
    (((1, 5), (6, 9)), (1,), "2 bins but 1 counts"),
])
def test_invalid_bins_raise(bins, counts, problem):
    with pytest.raises(ValueError, match=problem):
        LengthDistribution(bins, counts)


def test_bin_index():
    dist = LengthDistribution(((0, 10), (20, 30)), (1, 1))
    assert dist.bin_index(0) == 0 and dist.bin_index(25) == 1
    with pytest.raises(ValueError, match="length 15 falls in no bin"):
        dist.bin_index(15)
