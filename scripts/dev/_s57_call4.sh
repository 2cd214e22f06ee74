set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
T=tests/magi_attention/kernels/test_triton_gpu.py
mkdir -p /root/t && rm -f /root/t/*; python3 -m pytest -m gpu $T -k "gluon_backward or gluon_kernels_read" -p no:cacheprovider -q --collect-only 2>/dev/null | grep '::' > /root/t/ids
wc -l < /root/t/ids
split -n r/4 -d /root/t/ids /root/t/part.
for p in /root/t/part.0?; do mapfile -t ids < $p; timeout 300 python3 -m pytest -m gpu -p no:cacheprovider -q -rfEs "${ids[@]}" > $p.log 2>&1 & done
wait
cat /root/t/part.0?.log > $OUT/gluon_bwd_tests.log; for p in /root/t/part.0?.log; do tail -1 $p; done; grep -h "^FAILED\|^ERROR" /root/t/part.0?.log | head -20
V="bwd_s56 bwd_heavy_first bwd_s56_again"
P=scripts/dev/_s57_bwd_ab.py
timeout 100 python3 $P --out $OUT --file counter_magi_cp4.csv --cp-size 4 --strategies magi --masks full causal --variants $V --warmup-ms 300 > $OUT/counter_magi_cp4.log 2>&1; echo rc $?
timeout 60 python3 $P --out $OUT --file counter_ulysses_cp4.csv --heads 16:2 --masks --kernel-masks full:65536 causal:65536 --variants $V --warmup-ms 300 > $OUT/counter_ulysses_cp4.log 2>&1; echo rc $?
timeout 160 python3 $P --out $OUT --file counter_cp2_16k.csv --masks full_document causal_document block_causal_document --strategies magi hybrid_cp --kernel-masks full:16384 causal:16384 full:65536 causal:65536 --variants $V --warmup-ms 300 > $OUT/counter_cp2_16k.log 2>&1; echo rc $?
python3 - <<'PY'
import csv, os, collections, glob
for f in sorted(glob.glob(os.environ["OUT"] + "/counter_*.csv")):
    by = collections.defaultdict(dict)
    for r in csv.DictReader(open(f)): by[(r["mask"], r["strategy"], r["rank"])][r["order"]] = float(r["ms"])
    print(os.path.basename(f))
    for k, v in by.items():
        b = v.get("bwd_s56")
        print(" ", k, " ".join(f"{n[4:]}={v[n]:.2f}({v[n]/b:.3f})" for n in v))
PY
