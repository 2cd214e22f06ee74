"""The GPUs' SM clock and power during each measured cell: result rows against the samples
`scripts/device/gpu_session.sh` takes beside a run (clocks__NAME.csv, nvidia-smi once a second).

A cell's interval is from the previous row's `time` to its own (rows are written as cells
finish), so the samples in it cover the cell's build, gate and timing; a cell far off its peers
with a lower clock than theirs was throttled, one at the same clock was not.

    python scripts/dev/clocks_by_cell.py --rows out/cp_fa4__1.csv --clocks out/clocks__cp_fa4.csv
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

CLOCK_COLUMNS = ("timestamp", "index", "sm_mhz", "power_w", "temp_c")


def read_clocks(path: Path) -> pd.DataFrame:
    """nvidia-smi's csv (header with units, or none) -> timestamp (UTC), index, sm_mhz, ..."""
    frame = pd.read_csv(path, header=None, names=CLOCK_COLUMNS, skipinitialspace=True,
                        comment=None, dtype=str)
    frame = frame[frame["index"].str.strip().str.isdigit()]  # drops the header line
    out = pd.DataFrame({"time": pd.to_datetime(frame.timestamp.str.strip(), utc=True,
                                               format="%Y/%m/%d %H:%M:%S.%f"),
                        "gpu": frame["index"].astype(int)})
    for column in CLOCK_COLUMNS[2:]:
        out[column] = pd.to_numeric(frame[column].str.strip(), errors="coerce")
    return out


def clocks_by_cell(rows: pd.DataFrame, clocks: pd.DataFrame) -> pd.DataFrame:
    """One line per row: its TFLOPs/s and the mean SM clock / max power over every GPU's
    samples between the previous row's time and its own (NaN where none fell in it)."""
    rows = rows.assign(end=pd.to_datetime(rows["time"], utc=True)).sort_values("end")
    starts = rows.end.shift(1).fillna(rows.end.iloc[0] - pd.Timedelta(seconds=1))
    out = []
    for (_, row), start in zip(rows.iterrows(), starts):
        inside = clocks[(clocks.time > start) & (clocks.time <= row.end)]
        out.append({"kernel": row.kernel, "mask": row["mask"], "cp_size": row.get("cp_size"),
                    "direction": row.direction, "tflops_per_s": row.tflops_per_s,
                    "samples": len(inside), "mean_sm_mhz": inside.sm_mhz.mean(),
                    "max_power_w": inside.power_w.max()})
    return pd.DataFrame(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=Path, nargs="+", required=True)
    p.add_argument("--clocks", type=Path, required=True)
    args = p.parse_args(argv)
    rows = pd.concat(pd.read_csv(f) for f in args.rows)
    table = clocks_by_cell(rows[rows.status == "ok"], read_clocks(args.clocks))
    print(table.round(1).to_string(index=False))


if __name__ == "__main__":
    main()
