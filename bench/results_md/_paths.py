"""Where RESULTS.md and the result files are."""
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
RESULTS_MD = ROOT / "RESULTS.md"
RESULTS = ROOT / "results"
