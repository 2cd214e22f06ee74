set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
V="bwd_s56 bwd_heavy_first bwd_s56_again"
timeout 75 python3 scripts/dev/_s57_bwd_ab.py --out $OUT --file red_cp2_16k.csv --masks causal_document full_document --strategies magi hybrid_cp --kernel-masks full:16384 --variants $V --warmup-ms 200 --repeat 8 > $OUT/red_cp2_16k.log 2>&1; echo rc $?
python3 - <<'PY'
import csv, os, collections
by = collections.defaultdict(dict)
for r in csv.DictReader(open(os.environ["OUT"] + "/red_cp2_16k.csv")): by[(r["mask"], r["strategy"], r["rank"])][r["order"]] = float(r["ms"])
for k, v in by.items():
    b = v.get("bwd_s56")
    print(" ", k, " ".join(f"{n[4:]}={v[n]:.2f}({v[n]/b:.3f})" for n in v))
PY
timeout 55 python3 -m pytest -m gpu -p no:cacheprovider -q -x tests/magi_attention/kernels/test_triton_gpu.py -k "head_chunks_match" > $OUT/red_tests.log 2>&1; tail -2 $OUT/red_tests.log
