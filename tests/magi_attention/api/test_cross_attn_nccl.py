"""Cross-attention keys on CUDA (NCCL): one GPU as a 1-rank group, and two GPUs (``multigpu``),
on the Triton and FA4 backends in bf16. out, lse, dq, dk and dv after undispatch match dense
attention in float64 over the same bf16 inputs; a deterministic key gives all five bit for bit
alike in two runs (each on a freshly built key).

Tolerance as in the kernel tests: 2x the error of the backend alone over the whole mask on one
GPU (flex_flash_attn_func), plus 1e-3 * max|oracle| + 1e-4.
"""
import os
import socket
import tempfile
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from magi_attention.common import AttnMaskType

from ._cross_attn_cases import dense_mask

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

SEQLEN_Q = 4096
SEQLEN_K = 1536
HEADS = (8, 2)
HEAD_DIM = 128
CHUNK = 512
FULL, CAUSAL = AttnMaskType.FULL, AttnMaskType.CAUSAL
# name: mask as in _cross_attn_cases (slices, or ("varlen", cu_seqlens_q, cu_seqlens_k, causal))
MASKS = {
    "full": [(0, SEQLEN_Q, 0, SEQLEN_K, FULL)],
    "causal": [(0, SEQLEN_Q, 0, SEQLEN_K, CAUSAL)],  # bottom-right: early rows keep no key
    "paired_docs_full": ("varlen", [0, 1024, 1536, 3072, 4096], [0, 256, 768, 1024, 1536],
                         False),
    "paired_docs_causal": ("varlen", [0, 1024, 1536, 3072, 4096], [0, 256, 768, 1024, 1536],
                           True),
}
WORLD_SIZES = [1, pytest.param(2, marks=pytest.mark.multigpu)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slices(mask) -> list[tuple]:
    """(q0, q1, k0, k1, type) of a mask, the varlen form's non-empty documents expanded."""
    if mask[0] != "varlen":
        return mask
    _, cu_q, cu_k, causal = mask
    return [(a, b, c, d, CAUSAL if causal else FULL)
            for a, b, c, d in zip(cu_q, cu_q[1:], cu_k, cu_k[1:]) if b > a and d > c]


def _key(mask, backend: str, deterministic: bool):
    from magi_attention.api import magi_attn_flex_key, magi_attn_varlen_key
    args = dict(num_heads_q=HEADS[0], num_heads_kv=HEADS[1], head_dim=HEAD_DIM,
                cp_group_or_mesh=dist.group.WORLD, chunk_size=CHUNK, backend=backend,
                deterministic=deterministic)
    if mask[0] == "varlen":
        _, cu_q, cu_k, causal = mask
        return magi_attn_varlen_key(causal=causal, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **args)
    rows = torch.tensor([m[:4] for m in mask], dtype=torch.int32)
    return magi_attn_flex_key(rows[:, :2], rows[:, 2:], [m[4] for m in mask],
                              total_seqlen_q=SEQLEN_Q, total_seqlen_k=SEQLEN_K, **args)


def _inputs(device):
    """Global bf16 q, k, v, dout, the same on every rank."""
    g = torch.Generator(device=device).manual_seed(0)
    make = lambda n, h: torch.randn(n, h, HEAD_DIM, device=device, generator=g)  # noqa: E731
    return tuple(t.bfloat16() for t in (make(SEQLEN_Q, HEADS[0]), make(SEQLEN_K, HEADS[1]),
                                        make(SEQLEN_K, HEADS[1]), make(SEQLEN_Q, HEADS[0])))


def _step(key, q, k, v, dout):
    """(out, lse, dq, dk, dv), global (undispatched), of one calc_attn step."""
    from magi_attention.api import calc_attn, dispatch, undispatch
    local = [dispatch(q, key).requires_grad_(), dispatch(k, key, side="kv").requires_grad_(),
             dispatch(v, key, side="kv").requires_grad_()]
    out, meta = calc_attn(*local, key)
    dq, dk, dv = torch.autograd.grad(out, local, dispatch(dout, key))
    return ([undispatch(t, key) for t in (out.detach(), meta.lse, dq)]
            + [undispatch(t, key, side="kv") for t in (dk, dv)])


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| over b's finite entries; inf where the -inf entries (rows without keys) of
    a and b differ."""
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    if not torch.equal(torch.isfinite(a), finite):
        return float("inf")
    return (a[finite] - b[finite]).abs().max().item() if finite.any() else 0.0


def check_dense(backend: str, device) -> list[str]:
    from magi_attention.functional import flex_flash_attn_func
    from magi_attention.testing import dense_attention
    q, k, v, dout = _inputs(device)
    lines = []
    for name, mask in MASKS.items():
        got = _step(_key(mask, backend, deterministic=False), q, k, v, dout)
        ref_in = [t.double().requires_grad_() for t in (q, k, v)]
        ref_out, ref_lse = dense_attention(*ref_in,
                                           dense_mask(SEQLEN_Q, SEQLEN_K, mask).to(device))
        ref = [ref_out, ref_lse, *torch.autograd.grad(ref_out, ref_in, dout.double())]
        rows = torch.tensor([m[:4] for m in _slices(mask)], dtype=torch.int32, device=device)
        types = torch.tensor([int(m[4]) for m in _slices(mask)], dtype=torch.int32,
                             device=device)
        one_in = [t.clone().requires_grad_() for t in (q, k, v)]
        one, meta = flex_flash_attn_func(*one_in, rows[:, :2].contiguous(),
                                         rows[:, 2:].contiguous(), types, backend=backend)
        base = [one, meta.lse, *torch.autograd.grad(one, one_in, dout)]
        for label, a, r, b in zip(("out", "lse", "dq", "dk", "dv"), got, ref, base):
            err = _max_err(a, r)
            scale = r[torch.isfinite(r)].abs().max().item() if torch.isfinite(r).any() else 0.0
            tol = 2 * _max_err(b, r) + 1e-3 * scale + 1e-4
            lines.append(f"{name} {label} err={err:.3e} tol={tol:.3e} "
                         f"{'ok' if err <= tol else 'FAIL'}")
    return lines


def check_deterministic(backend: str, device) -> list[str]:
    q, k, v, dout = _inputs(device)
    lines = []
    for name, mask in MASKS.items():
        runs = [_step(_key(mask, backend, deterministic=True), q, k, v, dout) for _ in range(2)]
        for label, a, b in zip(("out", "lse", "dq", "dk", "dv"), *runs):
            lines.append(f"{name} {label} {'ok' if torch.equal(a, b) else 'FAIL'}")
    return lines


CHECKS = {"dense": check_dense, "deterministic": check_deterministic}


def _worker(rank, world_size, port, out_dir, backend, check, device="cuda"):
    """device "cpu" (gloo, the reference kernel): a smoke test of this worker itself."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank,
                            world_size=world_size)
    lines = []
    try:
        lines = CHECKS[check](backend, device)
    except Exception:
        lines.append("ERROR " + traceback.format_exc())
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
            f.write("\n".join(lines))
        dist.destroy_process_group()


def _run(world_size: int, backend: str, check: str) -> list[str]:
    from magi_attention.functional import backend_reason
    if torch.cuda.device_count() < world_size:
        pytest.skip(f"needs {world_size} CUDA GPUs")
    reason = backend_reason(backend, torch.empty(1, HEADS[0], HEAD_DIM, device="cuda",
                                                 dtype=torch.bfloat16))
    if reason is not None:
        pytest.skip(reason)
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world_size, _free_port(), out_dir, backend, check),
                 nprocs=world_size, join=True)
        lines = [line for r in range(world_size)
                 for line in open(os.path.join(out_dir, f"rank{r}.txt")).read().splitlines()]
    print("\n".join(lines))
    return lines


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("backend", ["triton", "fa4"])
def test_cross_attention_matches_dense_attention(backend, world_size):
    lines = _run(world_size, backend, "dense")
    assert len(lines) == world_size * len(MASKS) * 5, lines
    assert not any(line.startswith("ERROR") or line.endswith("FAIL") for line in lines)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
@pytest.mark.parametrize("backend", ["triton", "fa4"])
def test_deterministic_cross_attention_is_bitwise_repeatable(backend, world_size):
    lines = _run(world_size, backend, "deterministic")
    assert len(lines) == world_size * len(MASKS) * 5, lines
    assert not any(line.startswith("ERROR") or line.endswith("FAIL") for line in lines)
