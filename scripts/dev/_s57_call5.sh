set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
V="bwd_s56 bwd_heavy_first bwd_s56_again"
P=scripts/dev/_s57_bwd_ab.py
timeout 110 python3 $P --out $OUT --file tma_out_cp2_16k.csv --masks full_document causal_document block_causal_document --strategies magi hybrid_cp --kernel-masks full:16384 causal:16384 sliding_window_causal:16384 --variants $V --warmup-ms 300 > $OUT/tma_out_cp2_16k.log 2>&1; echo rc $?
timeout 60 python3 $P --out $OUT --file tma_out_magi_cp4.csv --cp-size 4 --strategies magi --masks causal --variants $V --warmup-ms 300 > $OUT/tma_out_magi_cp4.log 2>&1; echo rc $?
python3 - <<'PY'
import csv, os, collections, glob
for f in sorted(glob.glob(os.environ["OUT"] + "/tma_out_*.csv")):
    by = collections.defaultdict(dict)
    for r in csv.DictReader(open(f)): by[(r["mask"], r["strategy"], r["rank"])][r["order"]] = float(r["ms"])
    print(os.path.basename(f))
    for k, v in by.items():
        b = v.get("bwd_s56")
        print(" ", k, " ".join(f"{n[4:]}={v[n]:.2f}({v[n]/b:.3f})" for n in v))
PY
T=tests/magi_attention/kernels/test_triton_gpu.py
mkdir -p /root/t && rm -f /root/t/*; python3 -m pytest -m gpu $T -k "gluon_backward_every_mask or gluon_backward_head_chunks or gluon_kernels_read or row_intervals_by_tma or bitmaps" -p no:cacheprovider -q --collect-only 2>/dev/null | grep '::' > /root/t/ids
split -n r/6 -d /root/t/ids /root/t/part.
for p in /root/t/part.0?; do mapfile -t ids < $p; timeout 100 python3 -m pytest -m gpu -p no:cacheprovider -q -rfEs -x "${ids[@]}" > $p.log 2>&1 & done
wait
cat /root/t/part.0?.log > $OUT/gluon_bwd_tests_tma_out.log; for p in /root/t/part.0?.log; do tail -1 $p; done; grep -h "^FAILED\|^ERROR" /root/t/part.0?.log | head
