#!/usr/bin/env bash
# perf_analyzer's --request-count race (129f03b) made likely: gdb, in
# non-stop mode, holds perf_analyzer's main thread HOLD_S seconds (default 1)
# on entering InferenceProfiler::ProfileHelper while its workers run on, as
# a busy machine may deschedule it there, then detaches. RUNS runs (default
# 5) of each protocol, gRPC unary and streaming, at concurrency 1, against
# BIN (an ASan build). tests/e2e/test_perf_analyzer.py makes the same hold.
#   MEASURE=count    --request-count 200 (the e2e test before 129f03b)
#   MEASURE=windows  count windows (run.sh, the e2e test since 129f03b)
# A run that outlives LIMIT s (default 60) is a hang: the server's statistics
# and perf_analyzer's stacks are kept in W.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BIN=${BIN:?BIN=ptserve binary}
PAX=${PAX:-$ROOT/.venv/libexec/perf_analyzer}
MEASURE=${MEASURE:-count}
RUNS=${RUNS:-5}
PORT=${PORT:-18020}
LIMIT=${LIMIT:-60}
export HOLD_S=${HOLD_S:-1}
MODELS=${MODELS:-$ROOT/tests/e2e/.cache/torch_models}
W=${W:-/tmp/pahang/hold-$MEASURE-$PORT}
GP=$((PORT+1))
rm -rf $W; mkdir -p $W/repo
ln -s $MODELS/mlp $W/repo/mlp
cat > $W/hold.py <<'EOF'
import gdb, os, time
gdb.execute("set pagination off")
class Hold(gdb.Breakpoint):
    def stop(self):
        time.sleep(float(os.environ["HOLD_S"]))
        gdb.post_event(lambda: (gdb.execute("detach"), gdb.execute("quit")))
        return False
Hold("triton::perfanalyzer::InferenceProfiler::ProfileHelper")
EOF
source "$(dirname "$0")/serve.sh"  # the server (SP) and MARGS
# the wrapper in .venv/bin sets this for the CUDA runtime stub
export LD_LIBRARY_PATH=$ROOT/.venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib
echo "start $(date -u +%FT%TZ) bin=$BIN measure=$MEASURE hold=${HOLD_S}s" > $W/meta
n=0; hangs=0
for i in $(seq $RUNS); do
  for mode in unary stream; do
    s=""; [ $mode = stream ] && s=--streaming
    n=$((n+1))
    curl -s localhost:$PORT/v2/models/mlp/stats > $W/before.json
    gdb -batch -nx -ex "set non-stop on" -ex "source $W/hold.py" \
      -ex "run" --args $PAX -m mlp -i grpc $s -u 127.0.0.1:$GP --concurrency-range 1 $MARGS \
      > $W/pa.out 2>&1 &
    G=$!
    P=""; for t in $(seq 50); do P=$(pgrep -P $G -f libexec/perf_analyzer); [ -n "$P" ] && break; sleep 0.1; done
    for t in $(seq $LIMIT); do kill -0 $P 2>/dev/null || break; sleep 1; done
    if kill -0 $P 2>/dev/null; then
      hangs=$((hangs+1))
      echo "HANG run $n $(date -u +%T) mode=$mode" >> $W/hangs.log
      gdb -p $P -batch -ex "thread apply all bt" > $W/hang$hangs.client.txt 2>&1
      cp $W/before.json $W/hang$hangs.before.json
      curl -s localhost:$PORT/v2/models/mlp/stats > $W/hang$hangs.stats.json
      kill -9 $P
      cp $W/pa.out $W/hang$hangs.pa.out
    fi
    kill $G 2>/dev/null; wait $G 2>/dev/null
    grep -q "Throughput:" $W/pa.out || { echo "run $n mode=$mode: no result" >> $W/fails.log; tail -5 $W/pa.out >> $W/fails.log; }
    echo "$n runs, $hangs hangs" > $W/progress
  done
done
kill $SP; wait $SP; echo "server exit $? $(date -u +%FT%TZ)" >> $W/progress
