set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
V="bwd_heads_8 bwd_heads_4 bwd_heads_2 bwd_heads_1 bwd_heavy_first"
P=scripts/dev/rank_mask_probe.py
timeout 150 python3 $P --out $OUT --file chunks_magi_cp4.csv --cp-size 4 --strategies magi --masks full causal --variants $V --warmup-ms 300 > $OUT/chunks_magi_cp4.log 2>&1; echo rc $?
timeout 120 python3 $P --out $OUT --file chunks_ulysses_cp4.csv --heads 16:2 --masks --kernel-masks full:65536 causal:65536 --variants $V --warmup-ms 300 > $OUT/chunks_ulysses_cp4.log 2>&1; echo rc $?
timeout 100 python3 $P --out $OUT --file chunks_magi_cp2.csv --cp-size 2 --strategies magi --masks full causal causal_document --variants $V --warmup-ms 300 > $OUT/chunks_magi_cp2.log 2>&1; echo rc $?
python3 - <<'PY'
import csv, os, collections, glob
for f in sorted(glob.glob(os.environ["OUT"] + "/chunks_*.csv")):
    by = collections.defaultdict(dict)
    for r in csv.DictReader(open(f)): by[(r["mask"], r["strategy"], r["rank"])][r["order"]] = float(r["ms"])
    print(os.path.basename(f))
    for k, v in by.items():
        b = v.get("bwd_heads_8")
        print(" ", k, " ".join(f"{n[4:]}={v[n]:.2f}({v[n]/b:.3f})" for n in v))
PY
