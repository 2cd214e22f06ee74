set -u
export PYTHONPATH=$PWD
T=tests/magi_attention/kernels/test_triton_gpu.py
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
timeout 200 python3 scripts/dev/_s57_bwd_ab.py --out $OUT --file bwd_ab_16k.csv --masks full_document causal_document block_causal_document --strategies magi hybrid_cp --kernel-masks full:16384 causal:16384 full:65536 causal:65536 --variants bwd_s56 bwd_per_item bwd_persistent bwd_s56_again --warmup-ms 300 > $OUT/bwd_ab.log 2>&1; echo probe rc $?
python3 - <<'PY'
import csv, os, collections
rows = list(csv.DictReader(open(os.environ["OUT"] + "/bwd_ab_16k.csv")))
by = collections.defaultdict(dict)
for r in rows: by[(r["mask"], r["strategy"], r["rank"])][r["order"]] = float(r["ms"])
for k, v in by.items():
    b = v.get("bwd_s56")
    print(k, " ".join(f"{n}={v[n]:.3f}({v[n]/b:.3f})" for n in v))
PY
