#!/usr/bin/env bash
# run.sh's campaign with knobs, to replay what the sightings of issue 49's
# hang ran (docs/reliability.md, "perf_analyzer over gRPC on the ASan
# build"): the e2e test of 2026-11-26 (dd65acc^) ran perf_analyzer with
# --request-count 200 at concurrency 1 and 2, against gRPC core's server.
#   BIN       the ptserve binary (an ASan build)
#   SECS      how long to run (default 2400)
#   MEASURE   count: --request-count 200 (the test before 129f03b);
#             windows: count windows, as run.sh and the test since 129f03b
#   CS        concurrencies (default "1 2")
#   MODES     "unary stream" (default) or one of them
#   PORT      HTTP port; gRPC is PORT+1, metrics PORT+2 (default 18000)
#   W         work folder (default /tmp/pahang/<MEASURE>-<PORT>)
#   MODELS    the test suite's TorchScript models (tests/e2e/.cache)
#   LIMIT     seconds after which a run is a hang (default 120)
# A hang keeps both processes' stacks (gdb), the sockets and the statistics.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BIN=${BIN:?BIN=ptserve binary}
PA=${PA:-$ROOT/.venv/bin/perf_analyzer}
MEASURE=${MEASURE:-count}
CS=${CS:-1 2}
MODES=${MODES:-unary stream}
PORT=${PORT:-18000}
LIMIT=${LIMIT:-120}
MODELS=${MODELS:-$ROOT/tests/e2e/.cache/torch_models}
W=${W:-/tmp/pahang/$MEASURE-$PORT}
GP=$((PORT+1))
rm -rf $W; mkdir -p $W/repo
ln -s $MODELS/mlp $W/repo/mlp
source "$(dirname "$0")/serve.sh"  # the server (SP) and MARGS
echo "start $(date -u +%FT%TZ) bin=$BIN measure=$MEASURE cs='$CS' modes='$MODES'" > $W/meta
END=$(( $(date +%s) + ${SECS:-2400} ))
n=0; hangs=0
while [ $(date +%s) -lt $END ]; do
  for mode in $MODES; do
    for c in $CS; do
      s=""; [ $mode = stream ] && s=--streaming
      # as the test: compression on the concurrency-2 runs
      comp=""; [ $c = 2 ] && { [ $mode = stream ] && comp="--grpc-compression-algorithm deflate" || comp="--grpc-compression-algorithm gzip"; }
      n=$((n+1))
      curl -s localhost:$PORT/v2/models/mlp/stats > $W/before.json
      $PA -m mlp -i grpc $s -u 127.0.0.1:$GP --concurrency-range $c $MARGS $comp > $W/pa.out 2>&1 &
      P=$!
      for t in $(seq $LIMIT); do kill -0 $P 2>/dev/null || break; sleep 1; done
      if kill -0 $P 2>/dev/null; then
        hangs=$((hangs+1))
        echo "HANG run $n $(date -u +%T) mode=$mode c=$c comp=$comp" | tee -a $W/hangs.log
        gdb -p $P -batch -ex "thread apply all bt" > $W/hang$hangs.client.txt 2>&1
        gdb -p $SP -batch -ex "thread apply all bt" > $W/hang$hangs.server.txt 2>&1
        ss -tnip "( sport = :$GP or dport = :$GP )" > $W/hang$hangs.ss.txt 2>&1
        cp $W/pa.out $W/hang$hangs.pa.out
        cp $W/before.json $W/hang$hangs.before.json
        curl -s localhost:$PORT/v2/models/mlp/stats > $W/hang$hangs.stats.json
        kill -9 $P
      fi
      wait $P; rc=$?
      [ $rc -ne 0 ] && { echo "run $n rc=$rc mode=$mode c=$c $comp" >> $W/fails.log; tail -5 $W/pa.out >> $W/fails.log; }
      echo "$n runs, $hangs hangs" > $W/progress
    done
  done
done
kill $SP; wait $SP; echo "server exit $? $(date -u +%FT%TZ)" >> $W/progress
