"""The predictor against every measured CP cell: predicted and measured TFLOPs/s side by side.

    python -m bench.cp.predict.validation                       # results/*/cp, cp_size > 1
    python -m bench.cp.predict.validation --hardware h200x4 --results results

For every ok row of ``results/<hw>/cp/*.csv`` with cp_size > 1 (both local kernels), the cell is
predicted with the strategy and knobs the row names (its ``spec``), the rates of the row's GPU
(``rates.fit_rate_model``: single-GPU rows only, never a CP row with cp_size > 1) at the speed
of the row's own machine (``rates.host_scale``: that folder's cp 1 rows), the row's local
kernel and the default link model, all ranks on one node. ``<hw>/cp_predicted/
validation.csv`` gets one line per (cell, direction): predicted and measured TFLOPs/s and
runtime, the relative error, the measured row's file, commit and run, the prediction's notes
(MagiAttention's dispatch, stages and cut), and the commit and time of the prediction itself
(``git_sha``, ``time``: the results page marks the table stale when the predictor or the rows
it read change after that commit, ``bench.published``).
"""
from __future__ import annotations

import argparse
import ast
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bench.config import DataConfig, MaskChoice, StrategyChoice
from bench.provenance import current
from bench.results import LOCAL_KERNEL, latest_rows, now_iso, read_results
from bench.sweep import cell_mask

from .config import gpu_memory_gb_per_s
from .links import LinkModel, Topology
from .predictor import Models, predict_cell
from .rates import fit_rate_model, host_scale

__all__ = ["validate", "validation_path", "parse_spec", "MAIN_STRATEGIES", "TIE_MARGIN",
           "error_stats", "ranking", "main"]

# the strategies whose best the ranking names (the magi variants are arms of one of them)
MAIN_STRATEGIES = ("magi", "ulysses", "ring_p2p", "ring_allgather", "usp", "loongtrain",
                   "hybrid_cp")
TIE_MARGIN = 0.03  # a measured best within 3% of the second is a tie: not ranked
COLUMNS = ["hardware_dir", "hardware", LOCAL_KERNEL, "kernel", "mask", "seqlen", "cp_size",
           "direction", "predicted_tflops_per_s", "measured_tflops_per_s", "error",
           "predicted_runtime_ms", "measured_runtime_ms", "predicted_compute_ms",
           "predicted_exposed_ms", "predicted_comm_bytes_per_rank", "measured_file",
           "measured_commit", "measured_run_id", "notes", "git_sha", "time"]


def parse_spec(spec: str) -> tuple[str, dict]:
    """``name[k=v,...]`` -> (name, knobs), values as Python literals where they are one;
    ``local_kernel`` dropped (it is the row's local kernel, not a knob)."""
    name, _, rest = str(spec).partition("[")
    knobs = {}
    for item in filter(None, rest.rstrip("]").split(",")):
        key, _, value = item.partition("=")
        try:
            knobs[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            knobs[key] = value
    knobs.pop("local_kernel", None)
    return name, knobs


def validation_path(results_root: str | Path, hardware_dir: str) -> Path:
    return Path(results_root) / hardware_dir / "cp_predicted" / "validation.csv"


def _measured(results_root: Path, hardware_dir: str) -> pd.DataFrame:
    files = sorted((results_root / hardware_dir / "cp").glob("*.csv"))
    if not files:
        raise FileNotFoundError(f"no CP results under {results_root / hardware_dir / 'cp'}")
    frames = []
    for f in files:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = latest_rows(read_results(f))
        rows["measured_file"] = str(f)
        frames.append(rows)
    rows = latest_rows(pd.concat(frames, ignore_index=True))
    return rows[(rows["status"] == "ok") & (rows["cp_size"] > 1)].reset_index(drop=True)


def validate(results_root: str | Path, hardware_dir: str, links: LinkModel | None = None,
             gpus_per_node: int = 8) -> pd.DataFrame:
    """The validation table of one hardware folder (module doc)."""
    root = Path(results_root)
    rows = _measured(root, hardware_dir)
    out = []
    keys = ["hardware", LOCAL_KERNEL, "kernel", "spec", "mask", "seqlen", "cp_size",
            "num_heads_q", "num_heads_kv", "head_dim", "dtype"]
    rates = {}
    made = dict(git_sha=current().label, time=now_iso())
    for key, cell in rows.groupby(keys, sort=False):
        gpu, local, label, spec, mask_name, seqlen, cp = key[:7]
        hq, hkv, hd, dtype = (int(key[7]), int(key[8]), int(key[9]), key[10])
        name, knobs = parse_spec(spec)
        if (gpu, hkv) not in rates:
            rates[gpu, hkv] = host_scale(fit_rate_model(root, gpu, hkv), root, hardware_dir)
        models = Models(rates[gpu, hkv], local, gpu_memory_gb_per_s(gpu),
                        links=links or LinkModel(), topology=Topology(gpus_per_node))
        mask = cell_mask(MaskChoice(mask_name, mask_name), int(seqlen), DataConfig(), hkv)
        choice = StrategyChoice(label, name, knobs)
        predictions = {p.direction: p for p in predict_cell(choice, mask, int(cp), hq, hkv, hd,
                                                            models, dtype)}
        for r in cell.itertuples():
            p = predictions[r.direction]
            sent = max((w.sent_bytes() for w in p.works), default=0)
            out.append(dict(
                hardware_dir=hardware_dir, hardware=gpu, local_kernel=local, kernel=label,
                mask=mask_name, seqlen=int(seqlen), cp_size=int(cp), direction=r.direction,
                predicted_tflops_per_s=p.tflops_per_s, measured_tflops_per_s=r.tflops_per_s,
                error=(p.tflops_per_s / r.tflops_per_s - 1) if p.tflops_per_s else np.nan,
                predicted_runtime_ms=p.runtime_ms, measured_runtime_ms=r.runtime_ms,
                predicted_compute_ms=p.compute_ms, predicted_exposed_ms=p.exposed_ms,
                predicted_comm_bytes_per_rank=sent, measured_file=r.measured_file,
                measured_commit=r.git_sha, measured_run_id=r.run_id,
                notes=p.notes if p.status == "predicted" else f"{p.status}: {p.notes}", **made))
    return pd.DataFrame(out, columns=COLUMNS)


def error_stats(table: pd.DataFrame, by=("hardware_dir", "direction")) -> pd.DataFrame:
    """Median and largest absolute relative error, and the cell count, per group."""
    ok = table.dropna(subset=["error"])
    grouped = ok.assign(abs_error=ok["error"].abs()).groupby(list(by))["abs_error"]
    return grouped.agg(median="median", max="max", cells="count").reset_index()


def ranking(table: pd.DataFrame, strategies=MAIN_STRATEGIES, margin: float = TIE_MARGIN
            ) -> pd.DataFrame:
    """Per (hardware, local kernel, mask, seqlen, cp_size, direction): the measured and the
    predicted best of ``strategies``, whether the measured best is a tie (the second within
    ``margin``), and whether the prediction named it."""
    keys = ["hardware_dir", LOCAL_KERNEL, "mask", "seqlen", "cp_size", "direction"]
    rows = []
    main = table[table["kernel"].isin(strategies)].dropna(subset=["predicted_tflops_per_s"])
    for key, cell in main.groupby(keys):
        if len(cell) < 2:
            continue
        measured = cell.sort_values("measured_tflops_per_s", ascending=False)
        first, second = measured.iloc[0], measured.iloc[1]
        predicted = cell.loc[cell["predicted_tflops_per_s"].idxmax()]
        tie = second.measured_tflops_per_s >= first.measured_tflops_per_s * (1 - margin)
        rows.append(dict(zip(keys, key), measured_best=first.kernel,
                         predicted_best=predicted.kernel, tie=bool(tie),
                         right=predicted.kernel == first.kernel,
                         measured_margin=first.measured_tflops_per_s
                         / second.measured_tflops_per_s - 1))
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results", help="results root (default: results)")
    parser.add_argument("--hardware", nargs="+", default=None,
                        help="hardware folders (default: every one with a cp/ folder)")
    args = parser.parse_args(argv)
    root = Path(args.results)
    folders = args.hardware or sorted(p.parent.name for p in root.glob("*/cp") if p.is_dir())
    for folder in folders:
        table = validate(root, folder)
        path = validation_path(root, folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)
        stats = error_stats(table)
        ranks = ranking(table)
        ranked = ranks[~ranks["tie"]] if len(ranks) else ranks
        right = f"{int(ranked['right'].sum())}/{len(ranked)}" if len(ranked) else "0/0"
        print(f"{path}: {len(table)} cells; best strategy right on {right} non-tie cells")
        print(stats.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
