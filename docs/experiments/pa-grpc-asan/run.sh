#!/usr/bin/env bash
# Repro campaign for issue 49's hang (docs/reliability.md, "perf_analyzer
# over gRPC on the ASan build"): perf_analyzer gRPC (unary and streaming)
# against the ASan build's ptserve, many short runs for SECS seconds (default
# 2400); a run that does not end in 120 s is a hang: both processes' stacks,
# the sockets and the statistics are kept in /tmp/pahang/w.
#   make asan-build && SECS=2400 docs/experiments/pa-grpc-asan/run.sh
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BIN=${BIN:-$ROOT/build-asan/ptserve}
PA=$ROOT/.venv/bin/perf_analyzer
W=/tmp/pahang/w; rm -rf $W; mkdir -p $W/repo
for m in mlp add_sub_fp32; do ln -s $ROOT/tests/e2e/.cache/torch_models/$m $W/repo/$m; done
export ASAN_OPTIONS=detect_leaks=1:detect_odr_violation=0:alloc_dealloc_mismatch=0
export LSAN_OPTIONS=suppressions=$ROOT/tests/lsan.supp:print_suppressions=0
$BIN --model-repository $W/repo --http-port 18000 --grpc-port 18001 --metrics-port 18002 \
  --grpc-address 127.0.0.1 --allow-client-shm=true > $W/server.log 2>&1 &
SP=$!
for i in $(seq 120); do curl -sf localhost:18000/v2/health/ready && break; sleep 1; done
END=$(( $(date +%s) + ${SECS:-2400} ))
n=0; hangs=0
while [ $(date +%s) -lt $END ]; do
  for mode in "" "--streaming"; do
    for c in 1 2 8 32; do
      for comp in "" "--grpc-compression-algorithm gzip"; do
        n=$((n+1))
        $PA -m mlp -i grpc $mode -u 127.0.0.1:18001 --concurrency-range $c \
          --measurement-mode count_windows --measurement-request-count 200 \
          --stability-percentage 1000 $comp > $W/pa.out 2>&1 &
        P=$!
        for t in $(seq 120); do kill -0 $P 2>/dev/null || break; sleep 1; done
        if kill -0 $P 2>/dev/null; then
          hangs=$((hangs+1))
          echo "HANG run $n mode=$mode c=$c comp=$comp" | tee -a $W/hangs.log
          gdb -p $P -batch -ex "thread apply all bt" > $W/hang$hangs.client.txt 2>&1
          gdb -p $SP -batch -ex "thread apply all bt" > $W/hang$hangs.server.txt 2>&1
          ss -tnip "( sport = :18001 or dport = :18001 )" > $W/hang$hangs.ss.txt 2>&1
          cp $W/pa.out $W/hang$hangs.pa.out
          curl -s localhost:18000/v2/models/mlp/stats > $W/hang$hangs.stats.json
          kill -9 $P
        fi
        wait $P; rc=$?
        [ $rc -ne 0 ] && { echo "run $n rc=$rc mode=$mode c=$c $comp" >> $W/fails.log; tail -5 $W/pa.out >> $W/fails.log; }
        echo "$n runs, $hangs hangs" > $W/progress
      done
    done
  done
done
kill $SP; wait $SP; echo "server exit $?" >> $W/progress
