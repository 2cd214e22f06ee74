"""Rank program for the sbatch_torchrun test: a gloo all-reduce, then one JSON file per rank in argv[1]."""
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
keys = ("MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "SLURM_JOB_ID", "SLURM_NNODES", "CUDA_DEVICE_MAX_CONNECTIONS",
        "NCCL_NVLS_ENABLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING")
row = {"rank": rank, "world_size": world_size, "sum": total.item(), **{k: os.environ.get(k) for k in keys}}
Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(row))
dist.destroy_process_group()
