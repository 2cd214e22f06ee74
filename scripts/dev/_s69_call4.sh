#!/usr/bin/env bash
# Session 69, call 4 (one H200): the Gluon backward's GPU tests after Q_ROW_EARLY was made the
# only path (the producer's slightly reordered on grid plans too), four pytest workers.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
F=tests/magi_attention/kernels/test_triton_gpu.py
python3 -m pytest -m gpu $F -k "gluon_backward" -p no:cacheprovider -q --collect-only 2>/dev/null \
    | grep '::' > /tmp/ids
wc -l < /tmp/ids
split -n r/4 -d /tmp/ids /tmp/part.
for p in /tmp/part.0?; do
    mapfile -t ids < "$p"
    timeout 270 python3 -m pytest -m gpu -p no:cacheprovider -q -rfE "${ids[@]}" > "$p.log" 2>&1 &
done
wait
for p in /tmp/part.0?.log; do echo "=== $p"; cat "$p"; done > "$OUT/s69_call4_gluon_backward_tests.log"
tail -n 1 /tmp/part.0?.log
