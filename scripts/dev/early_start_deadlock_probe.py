"""What may come between the early forward's launch and its arrival flag under one hardware
queue (session 46). One GPU: the Gluon forward with an Arrival (the last 4096 keys late) is
launched, then a side stream sets the flag; in between it copies the late rows in by torch
(``torch_copy``) or not at all (``flag_only``). Each case runs in a subprocess under
CUDA_DEVICE_MAX_CONNECTIONS=1 with a 60 s limit: a timeout is a deadlock.

    python scripts/dev/early_start_deadlock_probe.py     # on the GPU; one line a case

Session 46 on an H100: flag_only finished, torch_copy timed out, as did the same copy by the
copy engines (a case since removed; a copy issued after the spinning kernel waits for it, so the
flag behind the copy never comes); hence the runtime's early_start only where the cast lands in
place (results/h100x2/cp_s46/).
"""
import os
import subprocess
import sys
import time

CASES = ("flag_only", "torch_copy")


def _run_case(case: str) -> None:
    import torch
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from magi_attention.comm.stream_flag import new_flag, write_flag
    from magi_attention.common import AttnSlice
    from magi_attention.kernels.block_sparse import plan_block_sparse
    from magi_attention.kernels.triton import gluon_forward as gf
    seqlen, hq, hk, d, late_rows = 16384, 64, 8, 128, 4096
    q = torch.randn(seqlen, hq, d, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(seqlen, 2 * hk, d, device="cuda", dtype=torch.bfloat16)
    src = torch.randn(late_rows, 2 * hk, d, device="cuda", dtype=torch.bfloat16)
    plan = plan_block_sparse([AttnSlice.make(0, seqlen, 0, seqlen, 1)], seqlen, seqlen,
                             gf.BLOCK_M, gf.BLOCK_N).to("cuda")
    late = gf.late_tiles(plan.num_k_tiles, gf.BLOCK_N, [(seqlen - late_rows, seqlen)])
    order, n_first = gf.arrival_order(plan, late)
    flag = new_flag(q.device)
    arrival = gf.Arrival(flag, torch.from_numpy(late).cuda(), torch.from_numpy(order).cuda(),
                         n_first)
    side = torch.cuda.Stream()
    for _ in range(5):
        side.wait_stream(torch.cuda.current_stream())
        gf.launch_fwd(q, kv[:, :hk], kv[:, hk:], plan, d ** -0.5, arrival=arrival)
        with torch.cuda.stream(side):
            if case == "torch_copy":
                kv[seqlen - late_rows:].copy_(src)
            write_flag(flag, 1, side)
        torch.cuda.current_stream().wait_stream(side)
        write_flag(flag, 0)
    torch.cuda.synchronize()
    print("done", case)


def main() -> None:
    if len(sys.argv) > 1:
        _run_case(sys.argv[1])
        return
    env = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1")
    for case in CASES:
        start = time.time()
        try:
            r = subprocess.run([sys.executable, __file__, case], env=env, timeout=60,
                               capture_output=True, text=True)
            print(case, "rc", r.returncode, f"{time.time() - start:.1f}s",
                  r.stdout[-200:].strip(), r.stderr[-400:].strip(), flush=True)
        except subprocess.TimeoutExpired:
            print(case, "TIMEOUT (deadlock)", flush=True)


if __name__ == "__main__":
    main()
