"""MagiAttention in your code: one training step of attention under context parallelism.

    torchrun --nproc-per-node 2 -m examples.magi_cp.train_step      # CPU, gloo, reference kernel

Every rank holds the same global q, k, v (leaf tensors, as an embedding output would be) and
the same mask. The README section "MagiAttention in your code" shows the part between the
markers; tests/examples/test_magi_cp_example.py runs this file and checks the README quotes it.
"""
import torch
import torch.distributed as dist

from magi_attention.common import AttnSlice, slices_to_tensors, to_dense
from magi_attention.testing import dense_attention


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        torch.cuda.set_device(dist.get_rank() % torch.cuda.device_count())
    torch.manual_seed(0)  # the same global tensors on every rank
    seqlen, num_heads_q, num_heads_kv, head_dim = 1024, 4, 2, 64
    q = torch.randn(seqlen, num_heads_q, head_dim, device=device, requires_grad=True)
    k = torch.randn(seqlen, num_heads_kv, head_dim, device=device, requires_grad=True)
    v = torch.randn(seqlen, num_heads_kv, head_dim, device=device, requires_grad=True)
    # --8<-- [start:readme]
    from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch

    # two documents: causal attention inside each
    slices = [AttnSlice.make(0, 640, 0, 640, "causal"), AttnSlice.make(640, 1024, 640, 1024, "causal")]
    key = magi_attn_flex_key(*slices_to_tensors(slices), seqlen, num_heads_q, num_heads_kv,
                             head_dim, cp_group_or_mesh=None,   # None: the default group
                             chunk_size=128, dtype=q.dtype)      # seqlen % (cp_size * chunk_size) == 0
    q_local, k_local, v_local = (dispatch(x, key) for x in (q, k, v))  # this rank's tokens
    out_local, meta = calc_attn(q_local, k_local, v_local, key)         # collective
    out = undispatch(out_local, key)                                   # global order, all ranks
    out.square().sum().backward()  # the same loss on every rank
    # dispatch's backward fills only this rank's rows of a global leaf's gradient:
    # sum the ranks' parts to get the gradient of the whole sequence
    for x in (q, k, v):
        dist.all_reduce(x.grad)
    # --8<-- [end:readme]
    if dist.get_rank() == 0:
        ref = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        ref_out, _ = dense_attention(*ref, to_dense(slices, seqlen, device=device))
        ref_out.square().sum().backward()
        for name, got, want in zip(("out", "dq", "dk", "dv"), (out, q.grad, k.grad, v.grad),
                                   (ref_out, *(t.grad for t in ref))):
            err = float((got.detach().double() - want.detach()).norm() / want.detach().norm())
            print(f"{name} rel_err {err:.1e}")
            assert err < 1e-4, f"{name} differs from single-device attention: {err:.2e}"
        print("ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
