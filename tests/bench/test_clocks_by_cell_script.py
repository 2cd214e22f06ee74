"""scripts/dev/clocks_by_cell.py: nvidia-smi's samples parsed and attributed to the cell whose
interval (previous row's time, own time] holds them."""

import pandas as pd
import pytest

SMI = """timestamp, index, clocks.current.sm [MHz], power.draw [W], temperature.gpu
2026/11/26 03:13:04.500, 0, 1980, 400.00, 50
2026/11/26 03:13:04.500, 1, 1960, 390.00, 49
2026/11/26 03:13:05.500, 0, 1700, 700.00, 60
2026/11/26 03:13:05.500, 1, 1600, 690.00, 61
2026/11/26 03:13:06.500, 0, 1500, 700.00, 62
"""


@pytest.fixture(scope="module")
def tool(load_script):
    return load_script("scripts/dev/clocks_by_cell.py")


def test_samples_go_to_the_cell_they_fall_in(tool, tmp_path):
    (tmp_path / "clocks.csv").write_text(SMI)
    clocks = tool.read_clocks(tmp_path / "clocks.csv")
    assert list(clocks.gpu) == [0, 1, 0, 1, 0] and clocks.sm_mhz.iloc[2] == 1700
    rows = pd.DataFrame({"time": ["2026-11-26T03:13:05+00:00", "2026-11-26T03:13:07+00:00"],
                         "kernel": ["magi", "ulysses"], "mask": ["full", "full"],
                         "cp_size": [2, 2], "direction": ["fwd", "fwd"],
                         "tflops_per_s": [600.0, 550.0]})
    table = tool.clocks_by_cell(rows, clocks)
    # the first cell: the two samples of 03:13:04.5; the second: the three after 03:13:05
    assert list(table.samples) == [2, 3]
    assert table.mean_sm_mhz.tolist() == [1970.0, 1600.0]
    assert table.max_power_w.tolist() == [400.0, 700.0]
