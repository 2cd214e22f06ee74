# session 59 call 1 (4 H200s, fresh): Triton at cp 4, 16k a GPU, the five masks, magi and
# magi_timed (built in that order) beside the six baselines
set -u
nvidia-smi -L
n=$(nvidia-smi -L | wc -l); [ "$n" -ge 4 ] || { echo "only $n GPUs: stopping"; exit 3; }
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-540} bash scripts/device/gpu_session.sh cp tri16kcp4 4 experiment=cp_h200x4 hardware=auto local_kernel=triton hardware.rounds=3 \
  'cp_sizes=[4]' 'seqlen_per_gpu=[16384]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
