# session 58 call 1: the red dK/dV adds' A/B + head-chunk tests (s57 call 6), then the Gluon
# backward's GPU test subset over 4 workers on the one GPU
set -u
bash scripts/dev/_s57_call6.sh
D=/tmp/t58 && mkdir -p $D
python3 -m pytest -m gpu -p no:cacheprovider -q --collect-only tests -k "gluon_backward or gluon_kernels_read" 2>/dev/null | grep '::' > $D/ids
echo "$(wc -l < $D/ids) ids"
split -n r/4 -d $D/ids $D/part.
for p in $D/part.0?; do mapfile -t ids < $p; timeout 300 python3 -m pytest -m gpu -p no:cacheprovider -q -rfE "${ids[@]}" > $p.log 2>&1 & done
wait
for p in $D/part.0?.log; do echo "$p: $(tail -1 $p)"; grep -E "^(FAILED|ERROR)" $p | head -5; done
cat $D/part.0?.log > $OUT/red_gluon_bwd_tests.log
