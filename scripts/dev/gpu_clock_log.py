"""Log every GPU's SM clock, power and clock-event reasons through NVML, every few ms, until
killed: a time line to lay beside a launch's host rows (their unix times) when a timing
drifts with what ran before it (notes/magi_cp.md, session 55: the SW power cap's clock dips).

    python scripts/dev/gpu_clock_log.py --out $OUT/clocks.csv --period-ms 2 &

Rows: unix_s, gpu, sm_mhz, power_w, reasons (hex). Only rows whose values changed are written,
so a long run stays small: NVML, like nvidia-smi's -lms sampling, gives a new reading only about
every 100 ms (session 55, H100), so polling faster adds timing precision to the changes, not
more readings.
"""
from __future__ import annotations

import argparse
import csv
import signal
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--period-ms", type=float, default=2.0)
    args = parser.parse_args()
    import pynvml  # on the device image (torch's venv); not a dependency of the project

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    last: dict[int, tuple] = {}
    with open(args.out, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["unix_s", "gpu", "sm_mhz", "power_w", "reasons"])
        while not stop:
            now = time.time()
            for i, h in enumerate(handles):
                value = (pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                         pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                         pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
                if last.get(i) != value:
                    last[i] = value
                    out.writerow([f"{now:.4f}", i, value[0], f"{value[1]:.1f}", hex(value[2])])
            time.sleep(args.period_ms / 1000.0)
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
