"""The cell engine both sweeps share (``bench.kernels.runner``, ``bench.cp.runner``): the mask of
a cell, what an exception or a ``supports`` reason becomes in a row, the row and its resume key,
and freeing memory between cells. The runners keep only what differs: how a kernel or a
strategy is prepared and timed, and (CP) the agreement between ranks.

Statuses: ``UnsupportedMask``, ``BackendUnavailable``, ImportError and NotImplementedError ->
``unsupported`` (``missing`` when the message says a package is absent, ``bench.status``),
``torch.cuda.OutOfMemoryError`` -> ``oom``, any other Exception -> ``error``; the gate's verdict
gives ``wrong``.
"""
from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.config import DataConfig, MaskChoice
from bench.data import sample_doc_lens
from bench.masks import PATTERNS, Mask, UnsupportedMask, build_mask
from bench.metrics import attn_flops, tflops_per_s
from bench.problem import Shapes
from bench.results import ResultRow, RunMeta, now_iso, resume_key
from bench.status import unsupported_status
from magi_attention.functional import BackendUnavailable

__all__ = ["UNSUPPORTED_ERRORS", "MAX_MESSAGE_CHARS", "RowSource", "error_message",
           "failure_of", "supports_failure", "cell_mask", "free_memory"]

UNSUPPORTED_ERRORS = (UnsupportedMask, BackendUnavailable, ImportError, NotImplementedError)
MAX_MESSAGE_CHARS = 400


def error_message(e: BaseException) -> str:
    """``Type: text`` on one line, cut to MAX_MESSAGE_CHARS (a row's message)."""
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:MAX_MESSAGE_CHARS]


def failure_of(e: Exception) -> tuple[str, str]:
    """(status, message) of an exception raised while a cell runs."""
    message = error_message(e)
    if isinstance(e, UNSUPPORTED_ERRORS):
        return unsupported_status(message), message
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return "oom", message
    return "error", message


def supports_failure(supports: Callable[[], str | None]) -> tuple[str, str] | None:
    """None when ``supports()`` says the cell can run, else the (status, message) of its rows:
    a reason -> unsupported (or missing); an unsupported-kind exception likewise; any other
    exception -> error."""
    try:
        reason = supports()
    except UNSUPPORTED_ERRORS as e:
        reason = error_message(e)
    except Exception as e:  # a broken predicate is the adapter's bug: the row says so
        return "error", f"supports() raised {error_message(e)}"
    return None if reason is None else (unsupported_status(reason), reason)


def cell_mask(choice: MaskChoice, seqlen: int, data: DataConfig, num_heads_kv: int) -> Mask:
    """The mask of one cell: document lengths from ``bench.data`` for the document patterns,
    one mask per KV head for the per-head patterns unless the config sets num_heads_kv."""
    params = dict(choice.params)
    pattern = PATTERNS[choice.name]
    if pattern.per_head and "num_heads_kv" not in params:
        params["num_heads_kv"] = num_heads_kv
    doc_lens = (sample_doc_lens(seqlen, seed=data.seed, distribution=data.distribution,
                                cap_ratio=data.cap_ratio) if pattern.needs_docs else None)
    return build_mask(choice.name, seqlen, doc_lens=doc_lens, seed=data.seed, **params)


def free_memory(device: torch.device) -> None:
    """Drop what the last cell left (collect first: cached blocks are freed only when unused)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class RowSource:
    """What every row of one sweep shares: the run's metadata, hardware and env columns."""

    meta: RunMeta
    hardware: str
    env: str

    def key(self, *, label: str, mask_label: str, shapes: Shapes, direction: str, cp_size: int,
            spec: str, version: str) -> tuple:
        """The resume key of a cell's row (``bench.results.RESUME_KEY``)."""
        s = shapes
        return resume_key(dict(hardware=self.hardware, kernel=label, mask=mask_label,
                               seqlen=s.seqlen, batch=s.batch, num_heads_q=s.num_heads_q,
                               num_heads_kv=s.num_heads_kv, head_dim=s.head_dim, dtype=s.dtype,
                               direction=direction, cp_size=cp_size, spec=spec,
                               kernel_version=version))

    def row(self, *, label: str, version: str, spec: str, mask_label: str, mask: Mask | None,
            shapes: Shapes, direction: str, cp_size: int, status: str, message: str = "",
            runtime_ms: float | None = None, peak_mem_gb: float | None = None,
            build_ms: float | None = None) -> ResultRow:
        """One result row; FLOPs from the mask's exact area, TFLOPs/s per GPU (/ cp_size)."""
        s, m = shapes, self.meta
        area = mask.area if mask is not None else None
        flops = (attn_flops(area, s.num_heads_q, s.head_dim, s.batch, direction)
                 if area is not None else None)
        return ResultRow(
            run_id=m.run_id, time=now_iso(), git_sha=m.git_sha, hardware=self.hardware,
            gpu_name=m.gpu_name, torch_version=m.torch_version, kernel_version=version,
            kernel=label, mask=mask_label, seqlen=s.seqlen, batch=s.batch,
            num_heads_q=s.num_heads_q, num_heads_kv=s.num_heads_kv, head_dim=s.head_dim,
            dtype=s.dtype, direction=direction, cp_size=cp_size, mask_area=area, flops=flops,
            runtime_ms=runtime_ms,
            tflops_per_s=(tflops_per_s(flops, runtime_ms, cp_size)
                          if runtime_ms and flops else None),
            peak_mem_gb=peak_mem_gb, build_ms=build_ms, status=status, message=message,
            env=self.env, spec=spec, gpu_clocks=m.gpu_clocks, versions=m.versions)
