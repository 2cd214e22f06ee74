# Variables that must be set before a benchmark process starts (CUDA and NCCL read them once, at start-up).
# Sourced by slurm/sbatch_torchrun.sh and, through `setup` in configs/hydra/launcher/slurm.yaml, by every
# submitit job; the result rows copy them into their metadata. A value already in the environment wins, except
# for the multicast switches, which stay off.

# One hardware work queue per device: kernels reach the GPU in launch order across streams, so a communication
# kernel launched before the attention kernel it overlaps with gets its SMs first (MagiAttention's multi-stage
# overlap and Megatron's CP both rely on this ordering). bench.cp sets the same where it is unset
# (bench/cp/runner.py CUDA_CONNECTIONS), so a plain torchrun measures what a Slurm job does.
export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-1}"

# NVLink SHARP / multicast off in NCCL, PyTorch symmetric memory and NVSHMEM. On shared hosts a program that creates
# multicast objects can put the host's GPUs out of service (for a day or more on the machines we measure on), and on
# clusters without the fabric manager's multicast support NCCL's NVLS init fails or hangs. The benchmark's
# collectives (all-to-all-v, send/recv, all-gather) do not use NVLS anyway.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1

# A rank that fails aborts its communicators instead of leaving the others hanging until the job's time limit.
export TORCH_NCCL_ASYNC_ERROR_HANDLING="${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}"
export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
# Cluster-specific, left to the site: NCCL_SOCKET_IFNAME (bootstrap interface), NCCL_IB_HCA (which HCAs to use).
