"""cudnn: cuDNN's fused attention (SDPA forward and backward) through the nvidia-cudnn-frontend
Python graph API, over the libcudnn that torch ships.

One forward graph and one backward graph per cell, built in ``prepare``; each timed call is one
``graph.execute`` on buffers allocated once. Masks:

- one window over each batch row (full, causal, sliding window): q, k, v stay in the bshd
  buffers, described to cuDNN as dims ``[b, h, s, d]`` with bshd strides; the window becomes
  the diagonal band (``use_causal_mask`` for right bound 0, ``diagonal_band_left_bound`` =
  window_left + 1, since cuDNN's left bound counts the diagonal);
- full or causal documents: the packed (THD) layout, one cuDNN batch entry per document, with
  ragged offsets (token offsets times the row width) and per-document lengths under the padding
  mask, as the frontend's ragged SDPA samples do.

The forward runs with ``generate_stats=True`` (a training forward: it writes the softmax stats
that the backward reads, as flash kernels write their lse). The frontend 1.32 also ships Python
(CuTe DSL) engines; plans from those are deselected, so the rows measure the cuDNN library's
own engines, whatever else is installed.
"""
from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

import torch

from bench.masks import Mask, UnsupportedMask

from ._autograd import half_dtype, needs_cuda
from ._flash import FlashPlan, flash_plan, import_error, plan_reason
from .base import Inputs, KernelAdapter, Prepared, Shapes

MODULE = "cudnn"
# Packed buffers get this many rows of slack: the frontend's ragged SDPA samples size them
# to the token count rounded up to 64.
ROW_ALIGN = 64
_HANDLES: dict[int, object] = {}


def _handle(cudnn, device: torch.device):
    """One cuDNN handle per device (cuDNN handles are not to be shared across threads; the
    benchmark is single-threaded), on torch's current stream so CUDA-event timing sees it."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _HANDLES:
        with torch.cuda.device(index):
            _HANDLES[index] = cudnn.create_handle()
    handle = _HANDLES[index]
    cudnn.set_stream(handle, torch.cuda.current_stream(index).cuda_stream)
    return handle


@dataclass(frozen=True)
class _Layout:
    """cuDNN's view of a bshd (dense) or thd (packed) buffer: dims ``[batch, heads, seqlen, d]``.

    batch/seqlen are the documents and the longest document when packed; ``cu`` (int64 token
    offsets ``[batch + 1]``) is None for dense buffers; ``rows`` is the first dim of a packed
    buffer (tokens, rounded up to ROW_ALIGN).
    """

    batch: int
    seqlen: int
    cu: torch.Tensor | None
    rows: int

    def dims(self, heads: int, width: int) -> list[int]:
        return [self.batch, heads, self.seqlen, width]

    def strides(self, heads: int, width: int) -> list[int]:
        return [self.seqlen * heads * width, width, heads * width, 1]

    def stats_strides(self, heads: int) -> list[int]:
        # packed stats are [tokens, heads] (like the frontend's ragged samples); dense bhsd
        return self.strides(heads, 1) if self.cu is not None else [heads * self.seqlen, self.seqlen, 1, 1]


def _layout(plan: FlashPlan, shapes: Shapes, device: torch.device) -> _Layout:
    if not plan.varlen:
        return _Layout(shapes.batch, shapes.seqlen, None, 0)
    tokens = shapes.batch * shapes.seqlen
    rows = -(-tokens // ROW_ALIGN) * ROW_ALIGN
    return _Layout(len(plan.cu_seqlens) - 1, plan.max_seqlen, plan.cu_seqlens.to(device, torch.int64),
                   rows)


def _mask_kwargs(cudnn, plan: FlashPlan, layout: _Layout, graph, ragged: dict) -> dict:
    """The sdpa / sdpa_backward mask arguments; for packed documents also the length tensors."""
    if plan.varlen:
        seq_len_q = graph.tensor(dim=[layout.batch, 1, 1, 1], stride=[1, 1, 1, 1],
                                 data_type=cudnn.data_type.INT32)
        seq_len_kv = graph.tensor(dim=[layout.batch, 1, 1, 1], stride=[1, 1, 1, 1],
                                  data_type=cudnn.data_type.INT32)
        ragged["seq_len_q"], ragged["seq_len_kv"] = seq_len_q, seq_len_kv
        return dict(use_padding_mask=True, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv,
                    use_causal_mask=plan.causal)
    left, right = plan.window
    kwargs: dict = {}
    if right == 0:
        kwargs["use_causal_mask"] = True
    elif right > 0:
        kwargs["diagonal_band_right_bound"] = right
    if left >= 0:
        kwargs["diagonal_band_left_bound"] = left + 1
    return kwargs


class _Graphs:
    """The forward and backward graphs of one cell and the buffers they run on."""

    def __init__(self, cudnn, handle, plan: FlashPlan, shapes: Shapes, device: torch.device,
                 inputs: Inputs) -> None:
        self.cudnn, self.handle, self.plan, self.shapes = cudnn, handle, plan, shapes
        self.layout = layout = _layout(plan, shapes, device)
        hq, hkv, d = shapes.num_heads_q, shapes.num_heads_kv, shapes.head_dim
        self.buffers = {name: self._buffer(getattr(inputs, name), device)
                        for name in ("q", "k", "v", "dout")}
        b = self.buffers
        b["o"], b["dq"] = torch.empty_like(b["q"]), torch.empty_like(b["q"])
        b["dk"], b["dv"] = torch.empty_like(b["k"]), torch.empty_like(b["v"])
        b["stats"] = (torch.empty(layout.rows, hq, 1, dtype=torch.float32, device=device)
                      if layout.cu is not None else
                      torch.empty(shapes.batch, hq, shapes.seqlen, 1, dtype=torch.float32,
                                  device=device))
        if layout.cu is not None:
            lens = (layout.cu[1:] - layout.cu[:-1]).to(torch.int32).view(-1, 1, 1, 1)
            b["seq_len_q"] = b["seq_len_kv"] = lens
            view = layout.cu.view(-1, 1, 1, 1)
            b["q_offset"], b["kv_offset"] = view * hq * d, view * hkv * d
            b["stats_offset"] = view * hq
        self.fwd_graph, self.fwd_pack = self._forward()
        self.bwd_graph, self.bwd_pack = self._backward()
        self.fwd_workspace = self._workspace(self.fwd_graph, device)
        self.bwd_workspace = self._workspace(self.bwd_graph, device)

    def _buffer(self, t: torch.Tensor, device: torch.device) -> torch.Tensor:
        if self.layout.cu is None:
            return t.detach().contiguous().clone()
        flat = t.detach().reshape(-1, *t.shape[2:])
        out = torch.zeros(self.layout.rows, *flat.shape[1:], dtype=t.dtype, device=device)
        out[: flat.shape[0]] = flat
        return out

    def _new_graph(self):
        cudnn = self.cudnn
        io = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}
        return cudnn.pygraph(io_data_type=io[self.shapes.torch_dtype],
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)

    def _tensors(self, graph, names: dict[str, tuple[int, int]], ragged: dict) -> dict:
        """Graph tensors for ``names`` -> (heads, width); ragged offsets attached when packed."""
        out = {}
        for name, (heads, width) in names.items():
            out[name] = graph.tensor(dim=self.layout.dims(heads, width),
                                     stride=self.layout.strides(heads, width))
        if self.layout.cu is not None:
            n = self.layout.batch + 1
            offset = lambda: graph.tensor(dim=[n, 1, 1, 1], stride=[1, 1, 1, 1],
                                          data_type=self.cudnn.data_type.INT64)
            ragged["q_offset"], ragged["kv_offset"] = offset(), offset()
            for name, t in out.items():
                t.set_ragged_offset(ragged["kv_offset" if name in ("k", "v") else "q_offset"])
        return out

    def _stats(self, t):
        hq = self.shapes.num_heads_q
        t.set_data_type(self.cudnn.data_type.FLOAT).set_dim(self.layout.dims(hq, 1))
        t.set_stride(self.layout.stats_strides(hq))
        return t

    def _stats_offset(self, graph, ragged: dict):
        ragged["stats_offset"] = graph.tensor(dim=[self.layout.batch + 1, 1, 1, 1],
                                              stride=[1, 1, 1, 1],
                                              data_type=self.cudnn.data_type.INT64)
        return ragged["stats_offset"]

    def _forward(self):
        s, graph, ragged = self.shapes, self._new_graph(), {}
        hq, hkv, d = s.num_heads_q, s.num_heads_kv, s.head_dim
        t = self._tensors(graph, {"q": (hq, d), "k": (hkv, d), "v": (hkv, d)}, ragged)
        o, stats = graph.sdpa(q=t["q"], k=t["k"], v=t["v"], generate_stats=True,
                              attn_scale=s.softmax_scale,
                              **_mask_kwargs(self.cudnn, self.plan, self.layout, graph, ragged))
        o.set_output(True).set_dim(self.layout.dims(hq, d)).set_stride(self.layout.strides(hq, d))
        self._stats(stats.set_output(True))
        if self.layout.cu is not None:
            o.set_ragged_offset(ragged["q_offset"])
            stats.set_ragged_offset(self._stats_offset(graph, ragged))
        self._build(graph)
        return graph, self._pack({**t, "o": o, "stats": stats, **ragged})

    def _backward(self):
        s, graph, ragged = self.shapes, self._new_graph(), {}
        hq, hkv, d = s.num_heads_q, s.num_heads_kv, s.head_dim
        t = self._tensors(graph, {"q": (hq, d), "k": (hkv, d), "v": (hkv, d), "o": (hq, d),
                                  "dout": (hq, d)}, ragged)
        stats = self._stats(graph.tensor(dim=self.layout.dims(hq, 1),
                                         stride=self.layout.stats_strides(hq)))
        kwargs = _mask_kwargs(self.cudnn, self.plan, self.layout, graph, ragged)
        if self.layout.cu is not None:
            stats.set_ragged_offset(self._stats_offset(graph, ragged))
            # bounds the workspace by the real token count instead of batch * max_seqlen
            kwargs.update(max_total_seq_len_q=self.layout.rows, max_total_seq_len_kv=self.layout.rows)
        dq, dk, dv = graph.sdpa_backward(q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["dout"],
                                         stats=stats, attn_scale=s.softmax_scale, **kwargs)
        for grad, (heads, name) in zip((dq, dk, dv), ((hq, "q"), (hkv, "k"), (hkv, "v"))):
            grad.set_output(True).set_dim(self.layout.dims(heads, d))
            grad.set_stride(self.layout.strides(heads, d))
            if self.layout.cu is not None:
                grad.set_ragged_offset(ragged["kv_offset" if name != "q" else "q_offset"])
        self._build(graph)
        return graph, self._pack({**t, "stats": stats, "dq": dq, "dk": dk, "dv": dv, **ragged})

    def _build(self, graph) -> None:
        cudnn = self.cudnn
        from cudnn.engines.engine_ids import is_python_engine

        try:
            graph.validate()
            graph.build_operation_graph()
            graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            python = [i for i, p in enumerate(graph.plans) if is_python_engine(p.engine_id)]
            names = sorted({graph.get_plan_name_at_index(i).split("[")[0] for i in python})
            if len(python) == len(graph.plans):
                raise UnsupportedMask(f"only the frontend's Python engines ({names}) offer a "
                                      f"plan; no cuDNN library engine does")
            if names:
                graph.deselect_engines(names)
            graph.check_support()
            graph.build_plans()
        except cudnn.cudnnGraphNotSupportedError as e:
            raise UnsupportedMask(f"cuDNN {cudnn.backend_version_string()} has no engine for "
                                  f"this graph: {e}") from None

    def _pack(self, graph_tensors: dict) -> dict:
        return {t: self.buffers[name] for name, t in graph_tensors.items()}

    @staticmethod
    def _workspace(graph, device) -> torch.Tensor:
        return torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8, device=device)

    def forward(self) -> torch.Tensor:
        self.fwd_graph.execute(self.fwd_pack, self.fwd_workspace, handle=self.handle)
        return self.buffers["o"]

    def backward(self) -> None:
        self.bwd_graph.execute(self.bwd_pack, self.bwd_workspace, handle=self.handle)

    def to_bshd(self, t: torch.Tensor) -> torch.Tensor:
        if self.layout.cu is None:
            return t
        tokens = self.shapes.batch * self.shapes.seqlen
        return t[:tokens].view(self.shapes.batch, self.shapes.seqlen, *t.shape[1:])


class Cudnn(KernelAdapter):
    name = "cudnn"

    def version(self) -> str:
        try:
            frontend = importlib.metadata.version("nvidia-cudnn-frontend")
        except importlib.metadata.PackageNotFoundError:
            return "nvidia-cudnn-frontend (not installed)"
        try:
            import cudnn
            backend = cudnn.backend_version_string()
        except (ImportError, RuntimeError) as e:
            backend = f"? ({e})"
        return f"nvidia-cudnn-frontend {frontend}, cuDNN {backend} (graph SDPA)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or import_error(MODULE)
        if reason:
            return reason
        if shapes.head_dim % 8:
            return f"cuDNN SDPA needs head_dim a multiple of 8, got {shapes.head_dim}"
        return plan_reason(mask)

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        import cudnn

        plan = flash_plan(mask, shapes.batch, device)
        graphs = _Graphs(cudnn, _handle(cudnn, device), plan, shapes, device, inputs)
        graphs.forward()  # the backward reads this forward's o and stats
        how = (f"ragged thd, {graphs.layout.batch} documents, causal={plan.causal}" if plan.varlen
               else f"bshd window={plan.window}")
        return Prepared(fwd=graphs.forward, bwd=graphs.backward, out_bshd=graphs.to_bshd,
                        grads_bshd=lambda: tuple(graphs.to_bshd(graphs.buffers[n])
                                                 for n in ("dq", "dk", "dv")),
                        set_dout=lambda t: graphs.buffers["dout"].copy_(
                            graphs._buffer(t, device)),
                        extra={"mask": how, "engines": "cuDNN library (frontend Python engines off)"})
