"""scripts/dev/second_key_probe.py's interval arithmetic: how long NCCL kernels ran beside the
attention kernels, against sums worked out by hand."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "dev"))

from second_key_probe import overlap_us  # noqa: E402


@pytest.mark.parametrize("a, b, expected", [
    ([(0, 10), (20, 30)], [(5, 25)], 10.0),         # 5 us at the end of one, 5 at the start
    ([(0, 100)], [(10, 20), (30, 40)], 20.0),       # two inside one
    ([(0, 10)], [(10, 20)], 0.0),                   # touching is not beside
    ([(0, 10)], [], 0.0),
    ([(50, 60), (0, 10)], [(5, 55)], 10.0),         # a given out of order
])
def test_overlap_by_hand(a, b, expected):
    assert overlap_us(a, b) == expected
