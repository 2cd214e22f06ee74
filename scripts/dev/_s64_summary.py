"""Median TFLOPs/s of each arm by mask from a session-64 arms csv (what the call prints)."""
import sys

import pandas as pd

for path in sys.argv[1:]:
    d = pd.read_csv(path)
    print(path)
    print(d.groupby(["mask", "kernel", "label"])["tflops"].median().unstack(0).round(1).to_string())
