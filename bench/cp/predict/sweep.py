"""Every cell of a predicted CP sweep as a result row with status ``predicted``.

Rows have the measured rows' columns (``bench.results.ResultRow``), so tables and figures read
them alike, and differ where a measurement would: ``status`` "predicted" (or "unsupported",
with the strategy's reason), ``gpu_name`` "predicted", ``kernel_version`` naming the predictor
and the local kernel, ``env`` the model's settings, and the message what the model saw:

    predicted (model, not measured): compute_ms=..; exposed_comm_ms=..; comm_bytes_per_rank=..;
    nvlink_bytes_per_rank=..; network_bytes_per_rank=..; area_imbalance=..; <magi's choices>

``comm_bytes_per_rank`` is the largest over ranks of the bytes a rank sends in the direction, as
the measured rows count it; ``area_imbalance`` the largest rank's attention area over the mean.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.results import RunMeta, ResultRow, append_row, now_iso, run_meta
from bench.sweep import cell_mask
from bench.spec import measured_spec

from .config import PredictConfig
from .links import NETWORK, NVLINK
from .predictor import Models, Prediction, predict_cell
from .rates import fit_rate_model, rate_table

__all__ = ["predict_sweep", "prediction_message", "rank_details", "PREDICTED_GPU_NAME",
           "MESSAGE_PREFIX"]

PREDICTED_GPU_NAME = "predicted"
MESSAGE_PREFIX = "predicted (model, not measured)"


def prediction_message(p: Prediction) -> str:
    if p.status != "predicted":
        return p.notes
    sent = [w.sent_bytes() for w in p.works]
    areas = [w.total_area for w in p.works]
    mean = sum(areas) / len(areas) if areas else 0
    parts = [MESSAGE_PREFIX + f": compute_ms={p.compute_ms:.3f}",
             f"exposed_comm_ms={p.exposed_ms:.3f}",
             f"comm_bytes_per_rank={max(sent, default=0)}",
             f"nvlink_bytes_per_rank={max((w.sent_bytes(NVLINK) for w in p.works), default=0)}",
             f"network_bytes_per_rank={max((w.sent_bytes(NETWORK) for w in p.works), default=0)}",
             f"area_imbalance={max(areas) / mean if mean else 1.0:.3f}"]
    return "; ".join(parts + ([p.notes] if p.notes else []))


def _env(config: PredictConfig) -> str:
    links = config.links
    return (f"gpus_per_node={config.topology.gpus_per_node};"
            f"nvlink_gb_per_s={links.nvlink_gb_per_s:g};network_gb_per_s={links.network_gb_per_s:g};"
            f"nvlink_latency_us={links.nvlink_latency_us:g};"
            f"network_latency_us={links.network_latency_us:g};"
            f"memory_gb_per_s={config.memory_gb_per_s:g}")


def predict_sweep(config: PredictConfig, progress=print) -> list[ResultRow]:
    """Predict every (seqlen per GPU, cp_size, mask, strategy, direction) of ``config`` and
    write the rows to ``config.out_file`` (rewritten: a prediction is a function of the code,
    the rates and the settings), the rate table beside it (``rate_table.csv``)."""
    sweep = config.sweep
    hw = sweep.hardware
    rates = fit_rate_model(config.results_root, hw.name, hw.num_heads_kv)
    models = Models(rates, sweep.local_kernel, config.memory_gb_per_s, links=config.links,
                    topology=config.topology)
    out = Path(config.out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    rate_table(rates).to_csv(out.parent / "rate_table.csv", index=False)
    meta = run_meta()
    meta = RunMeta(meta.run_id, meta.git_sha, PREDICTED_GPU_NAME, meta.torch_version, _env(config))
    rows: list[ResultRow] = []
    details = out.with_name(f"{out.stem}_ranks.csv") if config.details else None
    if details is not None and details.exists():
        details.unlink()
    for per_gpu in sweep.seqlen_per_gpu:
        for cp in sweep.cp_sizes:
            for choice in sweep.masks:
                mask = cell_mask(choice, per_gpu * cp, sweep.data, hw.num_heads_kv)
                for strategy in sweep.strategies:
                    predictions = predict_cell(strategy, mask, cp, hw.num_heads_q,
                                               hw.num_heads_kv, hw.head_dim, models, hw.dtype,
                                               sweep.directions)
                    for p in predictions:
                        row = _row(meta, config, strategy, choice.label, mask, p)
                        append_row(out, row)
                        rows.append(row)
                    if details is not None:
                        _write_details(details, strategy.label, choice.label, mask.seqlen,
                                       predictions)
                if progress:
                    progress(f"predicted cp {cp}, {per_gpu} tokens a GPU, {choice.label}")
    return rows


DETAIL_COLUMNS = ["kernel", "mask", "seqlen", "cp_size", "direction", "rank", "stage",
                  "area", "sent_nvlink_bytes", "sent_network_bytes", "received_nvlink_bytes",
                  "received_network_bytes"]


def rank_details(label: str, mask_label: str, seqlen: int, p: Prediction) -> list[dict]:
    """One line per (rank, stage) of a prediction: the stage's attention area (cells x the
    share of q heads the rank runs) and the bytes it sends and receives per link class."""
    out = []
    for rank, work in enumerate(p.works):
        stages = dict.fromkeys([*work.area, *(s for s, _ in work.sent),
                                *(s for s, _ in work.received)])
        for stage in stages:
            out.append(dict(kernel=label, mask=mask_label, seqlen=seqlen, cp_size=p.cp_size,
                            direction=p.direction, rank=rank, stage=stage,
                            area=work.area.get(stage, 0),
                            sent_nvlink_bytes=work.sent.get((stage, NVLINK), 0),
                            sent_network_bytes=work.sent.get((stage, NETWORK), 0),
                            received_nvlink_bytes=work.received.get((stage, NVLINK), 0),
                            received_network_bytes=work.received.get((stage, NETWORK), 0)))
    return out


def _write_details(path: Path, label: str, mask_label: str, seqlen: int, predictions) -> None:
    lines = [d for p in predictions for d in rank_details(label, mask_label, seqlen, p)]
    if lines:
        pd.DataFrame(lines, columns=DETAIL_COLUMNS).to_csv(path, mode="a", index=False,
                                                           header=not path.exists())


def _row(meta: RunMeta, config: PredictConfig, strategy, mask_label: str, mask,
         p: Prediction) -> ResultRow:
    sweep, hw = config.sweep, config.sweep.hardware
    spec = measured_spec(strategy.name, {**strategy.knobs, "target": strategy.target,
                                         "local_kernel": sweep.local_kernel})
    return ResultRow(
        run_id=meta.run_id, time=now_iso(), git_sha=meta.git_sha, hardware=hw.name,
        gpu_name=meta.gpu_name, torch_version=meta.torch_version,
        kernel_version=f"bench.cp.predict[{strategy.name}] local={sweep.local_kernel}",
        kernel=strategy.label, mask=mask_label, seqlen=mask.seqlen, batch=1,
        num_heads_q=hw.num_heads_q, num_heads_kv=hw.num_heads_kv, head_dim=hw.head_dim,
        dtype=hw.dtype, direction=p.direction, cp_size=p.cp_size, mask_area=mask.area,
        flops=p.flops, runtime_ms=p.runtime_ms, tflops_per_s=p.tflops_per_s, peak_mem_gb=None,
        build_ms=None, status=p.status, message=prediction_message(p), env=meta.env, spec=spec)
