#!/bin/bash
# torchrun across the nodes of a Slurm allocation: one srun task per node, each a torchrun agent that starts
# NPROC_PER_NODE ranks; the agents meet at a c10d rendezvous on the allocation's first node.
#
#   sbatch --nodes=2 --gpus-per-node=8 --cpus-per-task=64 --time=01:00:00 [--partition=P --account=A] \
#       slurm/sbatch_torchrun.sh -m bench.cp <hydra overrides>
#
# Everything after the script name goes to torchrun as the program and its arguments (`-m module ...` or
# `path/to/script.py ...`). Resources come from the sbatch command line, so the same script serves any node
# count and GPU type. Variables it reads (all optional):
#   NPROC_PER_NODE   ranks per node; default: GPUs on the node (SLURM_GPUS_ON_NODE), else 1
#   MASTER_PORT      rendezvous port on the first node; default: 20000 + job id mod 20000
#   BENCH_REPO       checkout to run in and take slurm/env.sh from; default: the submission folder
#SBATCH --job-name=torchrun
#SBATCH --ntasks-per-node=1
#SBATCH --output=slurm-%x-%j.out
set -euo pipefail

REPO="${BENCH_REPO:-${SLURM_SUBMIT_DIR:-$PWD}}"
cd "$REPO"
# CUDA_DEVICE_MAX_CONNECTIONS and NCCL_* must be in the environment before any rank starts; srun passes it on.
source "$REPO/slurm/env.sh"

NPROC_PER_NODE="${NPROC_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}"
MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
MASTER_PORT="${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}"
export MASTER_ADDR MASTER_PORT
echo "torchrun: ${SLURM_NNODES} node(s) x ${NPROC_PER_NODE} rank(s), rendezvous ${MASTER_ADDR}:${MASTER_PORT}," \
     "job ${SLURM_JOB_ID}, CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS} NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE}"

# srun: one agent per node. Since Slurm 22.05 a step no longer inherits --cpus-per-task from the batch job, so it
# is passed again, else each agent (and every rank it starts) would be pinned to one core under task/affinity.
# --kill-on-bad-exit ends the other nodes' agents when one fails instead of leaving them in the rendezvous.
srun --ntasks-per-node=1 --nodes="$SLURM_NNODES" --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" --kill-on-bad-exit=1 \
    python -m torch.distributed.run \
        --nnodes="$SLURM_NNODES" \
        --nproc-per-node="$NPROC_PER_NODE" \
        --rdzv-backend=c10d \
        --rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}" \
        --rdzv-id="$SLURM_JOB_ID" \
        --max-restarts=0 \
        "$@"
