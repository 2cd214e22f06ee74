"""The rate table: how fast the local kernel runs a mask, from single-GPU measurements.

Measured rows of the local kernel alone on one GPU are the only timing input of the predictor:

- the kernel benchmark's FFA rows (``results/<gpu>/kernels/*.csv``: kernel ``ffa`` is the
  Triton backend, ``ffa_fa4`` the FA4 one; masks of 4k-64k tokens);
- the CP files' cp_size 1 rows (``results/*/cp/*.csv`` whose ``hardware`` is the GPU): every
  strategy at cp 1 is the local kernel on the whole mask, in the same harness and code as the
  CP rows (their median per cell is taken, and they weigh ``CP1_WEIGHT`` times a kernel row).

Each row becomes the tile counts of its mask (``tiles.tile_counts``), and per (backend,
direction) a linear time model is fitted to them by non-negative least squares on relative
error:

    time_us = launch + heads / 64 * (q_tile * q tiles + pair * visited pairs
                                     + partial * partial pairs [FA4: native or bitmap path;
                                       Triton: each weighed by its rows' key intervals])

A CP rank's call (a ring step's block, MagiAttention's fused stage, Ulysses' heads / U over
the whole sequence) is then priced from its own tile counts. The fit's residuals on its own
rows are written beside the rates (``rate_table``), so what the table does not capture is on
record.

Machines of one GPU model do not run equally fast: their sustained clocks (power limit,
cooling) and the harness settings of their runs differ. The cp 1 rows of the 2 x H100 host
run the fa4 backward at 693-727 TFLOPs/s on causal and full 16k, the 4 x H100 host's at
573-605, the same code and shapes. Where the machine a cell ran on is known (the validation's
``results/<hw>/cp/``), ``host_scale`` prices its calls at that machine's own speed: per
(backend, direction), the geometric mean of measured / table time over that folder's own
cp 1 rows (one number each; single-GPU rows only, like the table). Predictions for no
particular machine (the scale-out rows) keep the pooled table (scale 1).
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from bench.config import DataConfig, MaskChoice
from bench.masks import MASK_NAMES, PATTERNS
from bench.results import LOCAL_KERNEL, latest_rows, read_results
from bench.sweep import cell_mask
from magi_attention.common.slice_array import SliceArray

from .ops import Kernel
from .tiles import TileCounts, tile_counts

__all__ = ["RateModel", "fit_rate_model", "calibration_rows", "rate_table", "host_scale",
           "BACKENDS", "KERNEL_BENCH_BACKENDS"]

log = logging.getLogger(__name__)

BACKENDS = ("fa4", "triton")
# the kernel benchmark's FFA adapters and the backend each runs
KERNEL_BENCH_BACKENDS = {"ffa_fa4": "fa4", "ffa": "triton"}
CALIBRATION_HEADS = 64  # every calibration row: GQA 64:8, head_dim 128, bf16
# below this a call is launch-bound (a 1k-2k mask fills a fraction of the GPU): left out
MIN_SEQLEN = 4096
# the CP files' cp 1 rows: the harness, the code and the clocks of the rows predicted
CP1_WEIGHT = 3.0
FEATURES = {"fa4": ("launch", "q_tile", "pair", "partial_native", "partial_bitmap"),
            "triton": ("launch", "q_tile", "pair", "partial_interval")}


def _features(counts: TileCounts, heads: int, backend: str) -> np.ndarray:
    """Every visited pair costs a tile's compute; a partial one its masking on top (never
    less than a full one: the fit keeps every coefficient >= 0)."""
    share = heads / CALIBRATION_HEADS
    if backend == "fa4":
        native = counts.partial if counts.native else 0
        return np.array([1.0, share * counts.q_tiles, share * counts.pairs, share * native,
                         share * (counts.partial - native)])
    return np.array([1.0, share * counts.q_tiles, share * counts.pairs,
                     share * counts.partial_intervals])


@dataclass(frozen=True)
class RateModel:
    """Fitted coefficients (us per feature) per (backend, direction), and the rows they came
    from (``rows``: one per calibration cell, with measured and model times). ``scale``: the
    machine's speed per (backend, direction) relative to the pooled table (``host_scale``;
    missing: 1)."""

    gpu: str
    coefficients: dict[tuple[str, str], np.ndarray]
    rows: pd.DataFrame
    scale: dict[tuple[str, str], float] = field(default_factory=dict)

    def kernel_us(self, call: Kernel, backend: str, direction: str) -> float:
        """Predicted time of one local call (0 for an empty mask: the strategies skip it)."""
        if (backend, direction) not in self.coefficients:
            raise ValueError(f"no rates for backend {backend!r} on {self.gpu} ({direction}); "
                             f"known: {sorted(self.coefficients)}")
        counts = tile_counts(call.slices, call.seqlen_q, call.seqlen_k, backend, direction)
        if counts.area == 0:
            return 0.0
        return float(_features(counts, call.num_heads_q, backend)
                     @ self.coefficients[backend, direction]) * self.scale.get((backend,
                                                                                 direction), 1.0)

    def table(self) -> pd.DataFrame:
        """The coefficients as rows: gpu, backend, direction, feature, us."""
        return pd.DataFrame([dict(gpu=self.gpu, backend=b, direction=d, feature=f, us=float(c))
                             for (b, d), coef in sorted(self.coefficients.items())
                             for f, c in zip(FEATURES[b], coef)])


def calibration_rows(results_root: str | Path, gpu: str) -> pd.DataFrame:
    """The single-GPU rows of ``gpu`` under ``results_root``: source, mask, seqlen, backend,
    direction, runtime_ms, weight (see the module doc)."""
    root = Path(results_root)
    frames = []
    kernel_files = sorted((root / gpu / "kernels").glob("*.csv"))
    if kernel_files:
        k = latest_rows(_quiet_read(kernel_files))
        k = k[(k["status"] == "ok") & k["kernel"].isin(list(KERNEL_BENCH_BACKENDS))]
        frames.append(pd.DataFrame(dict(
            source=[f"{gpu}/kernels" for _ in range(len(k))], mask=k["mask"].values,
            seqlen=k["seqlen"].astype(int).values,
            backend=k["kernel"].map(KERNEL_BENCH_BACKENDS).values,
            direction=k["direction"].values, runtime_ms=k["runtime_ms"].astype(float).values,
            weight=1.0)))
    cp_files = sorted(root.glob("*/cp/*.csv"))
    if cp_files:
        c = latest_rows(_quiet_read(cp_files))
        c = c[(c["status"] == "ok") & (c["hardware"] == gpu) & (c["cp_size"] == 1)]
        if len(c) and LOCAL_KERNEL in c:
            med = (c.groupby([LOCAL_KERNEL, "mask", "seqlen", "direction"])["runtime_ms"]
                   .median().reset_index())
            frames.append(pd.DataFrame(dict(
                source=f"{gpu} cp 1", mask=med["mask"].values,
                seqlen=med["seqlen"].astype(int).values, backend=med[LOCAL_KERNEL].values,
                direction=med["direction"].values, runtime_ms=med["runtime_ms"].values,
                weight=CP1_WEIGHT)))
    if not frames:
        raise FileNotFoundError(f"no single-GPU rows of {gpu!r} under {root} (kernels/*.csv or "
                                f"cp_size 1 rows of */cp/*.csv)")
    rows = pd.concat(frames, ignore_index=True)
    shared = [m for m in MASK_NAMES if not PATTERNS[m].per_head]  # one mask for all heads
    rows = rows[(rows.seqlen >= MIN_SEQLEN) & rows.backend.isin(BACKENDS)
                & rows["mask"].isin(shared)]
    return rows.reset_index(drop=True)


def _quiet_read(files) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_results(files)


@lru_cache(maxsize=None)
def _mask_slices(mask: str, seqlen: int, num_heads_kv: int) -> SliceArray:
    built = cell_mask(MaskChoice(mask, mask), seqlen, DataConfig(), num_heads_kv)
    return SliceArray.from_slices(list(built.slices))


def fit_rate_model(results_root: str | Path, gpu: str, num_heads_kv: int = 8) -> RateModel:
    """Fit the rates of ``gpu`` (module doc); cached per (root, gpu)."""
    return _fit(str(Path(results_root).resolve()), gpu, num_heads_kv)


@lru_cache(maxsize=None)
def _fit(results_root: str, gpu: str, num_heads_kv: int) -> RateModel:
    from scipy.optimize import nnls

    rows = calibration_rows(results_root, gpu).copy()
    feats = []
    for r in rows.itertuples():
        slices = _mask_slices(r.mask, r.seqlen, num_heads_kv)
        counts = tile_counts(slices, r.seqlen, r.seqlen, r.backend, r.direction)
        feats.append(_features(counts, CALIBRATION_HEADS, r.backend))
    rows["features"] = feats
    coefficients, model_ms = {}, np.full(len(rows), np.nan)
    for (backend, direction), group in rows.groupby(["backend", "direction"]):
        a = np.stack(group["features"].values)
        y = group["runtime_ms"].values * 1e3
        w = group["weight"].values / y  # relative error, cp 1 rows weighed up
        coef, _ = nnls(a * w[:, None], y * w)
        coefficients[backend, direction] = coef
        model_ms[group.index] = a @ coef / 1e3
    rows["model_ms"] = model_ms
    rows["error"] = rows["model_ms"] / rows["runtime_ms"] - 1
    return RateModel(gpu, coefficients, rows.drop(columns="features"))


def host_scale(model: RateModel, results_root: str | Path, hardware_dir: str) -> RateModel:
    """``model`` priced at the speed of the machine of ``results_root/hardware_dir/cp`` (module
    doc): per (backend, direction), the geometric mean of measured / model time over that
    folder's cp 1 rows of ``model.gpu`` (a cell's strategies' median); pairs without such rows
    keep scale 1."""
    files = sorted((Path(results_root) / hardware_dir / "cp").glob("*.csv"))
    if not files:
        return model
    c = latest_rows(_quiet_read(files))
    c = c[(c["status"] == "ok") & (c["hardware"] == model.gpu) & (c["cp_size"] == 1)]
    if not len(c) or LOCAL_KERNEL not in c:
        return model
    med = c.groupby([LOCAL_KERNEL, "mask", "seqlen", "direction"])["runtime_ms"].median()
    logs: dict[tuple[str, str], list[float]] = {}
    shared = {m for m in MASK_NAMES if not PATTERNS[m].per_head}
    for (backend, mask, seqlen, direction), runtime_ms in med.items():
        if (backend, direction) not in model.coefficients or mask not in shared \
                or seqlen < MIN_SEQLEN:
            continue
        seqlen = int(seqlen)
        counts = tile_counts(_mask_slices(mask, seqlen, 8), seqlen, seqlen, backend, direction)
        table_us = _features(counts, CALIBRATION_HEADS, backend) @ model.coefficients[
            backend, direction]
        logs.setdefault((backend, direction), []).append(np.log(runtime_ms * 1e3 / table_us))
    return replace(model, scale={k: float(np.exp(np.mean(v))) for k, v in logs.items()})


def rate_table(model: RateModel) -> pd.DataFrame:
    """The calibration rows with measured and model TFLOPs/s (written as rate_table.csv)."""
    from bench.metrics import attn_flops

    rows = model.rows.copy()
    area = [int(tile_counts(_mask_slices(m, s, 8), s, s, "fa4", "fwd").area)
            for m, s in zip(rows["mask"], rows["seqlen"])]
    flops = [attn_flops(a, CALIBRATION_HEADS, 128, 1, d) for a, d in zip(area, rows["direction"])]
    rows.insert(0, "gpu", model.gpu)
    rows["measured_tflops_per_s"] = np.array(flops) / (rows["runtime_ms"].values * 1e9)
    rows["model_tflops_per_s"] = np.array(flops) / (rows["model_ms"].values * 1e9)
    return rows
