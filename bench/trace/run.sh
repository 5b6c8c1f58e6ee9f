#!/usr/bin/env bash
# bench/trace/run.sh — what request tracing costs: tracing off, at rate 1000
# (Triton's default rate) and at rate 1 (every request), on a tiny model,
# in one run.
#
#   bench/trace/run.sh
#
# 1. builds ptserve and tools/ptperf (Release, LibTorch) in build-bench-trace/;
# 2. writes a tiny TorchScript model (OUTPUT0 = INPUT0 + INPUT1,
#    OUTPUT1 = INPUT0 - INPUT1 on 16 floats) into a temporary repository;
# 3. for ROUNDS rounds, serves it in each mode in turn and measures it with
#    ptperf over HTTP at concurrency 1 and 4:
#      off       no --trace-config
#      rate1000  --trace-config level=TIMESTAMPS rate=1000 log-frequency=1000
#      rate1     --trace-config level=TIMESTAMPS rate=1    log-frequency=1000
#    (each writes Triton's JSON and the Chrome trace through the writer
#    thread, so the cost measured includes collecting and writing);
# 4. writes bench/trace/results/results.md and results.csv (report.py),
#    with ptperf's raw CSVs in results/raw/:
#    the median over rounds per mode and concurrency, and each mode's ratio
#    to "off" (throughput and p50) — compare ratios, not absolute numbers:
#    client, server and LibTorch share this machine's cores.
#
# Environment: BENCH_INTERVAL_MS (window, default 2000), BENCH_ROUNDS (3),
# BENCH_BUILD_DIR, BENCH_RESULTS, JOBS (build parallelism).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-trace}"
RESULTS="${BENCH_RESULTS:-$ROOT/bench/trace/results}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-2000}"
ROUNDS="${BENCH_ROUNDS:-3}"
PY=${PYTHON:-$ROOT/.venv/bin/python}  # the project venv (scripts/setup.sh)
WORK="$(mktemp -d /tmp/pts_bench_trace.XXXXXX)"
RAW="$WORK/raw"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct

cleanup() {
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT

log "building in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_WITH_TORCH=ON \
  -DPTS_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null

log "tiny model in $WORK/models"
mkdir -p "$WORK/models/tiny/1" "$RAW"
"$PY" - "$WORK/models/tiny/1/model.pt" <<'PYEOF'
import sys
import torch


class AddSub(torch.nn.Module):
    def forward(self, a, b):
        return a + b, a - b


# Traced, not scripted: a script read from stdin has no source for TorchScript.
example = (torch.zeros(1, 16), torch.zeros(1, 16))
torch.jit.trace(AddSub(), example).save(sys.argv[1])
PYEOF
cat >"$WORK/models/tiny/config.pbtxt" <<'CFG'
name: "tiny"
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
CFG

{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +changes)"
  echo "cpus=$(nproc)"
  echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "interval_ms=$INTERVAL_MS"
  echo "rounds=$ROUNDS"
} >"$RAW/meta.txt"

mode_args() {
  case "$1" in
    off) ;;
    rate1000) echo "--trace-config triton,file=$WORK/traces/$1.json --trace-config level=TIMESTAMPS --trace-config rate=1000 --trace-config log-frequency=1000" ;;
    rate1) echo "--trace-config triton,file=$WORK/traces/$1.json --trace-config level=TIMESTAMPS --trace-config rate=1 --trace-config log-frequency=1000" ;;
  esac
}

for round in $(seq 1 "$ROUNDS"); do
  for mode in off rate1000 rate1; do
    rm -rf "$WORK/traces"
    mkdir -p "$WORK/traces"
    PORT="$(free_port)"
    # shellcheck disable=SC2046
    "$BUILD/ptserve" --model-repository "$WORK/models" --http-port "$PORT" \
      --http-address 127.0.0.1 --allow-grpc false --allow-metrics false \
      $(mode_args "$mode") >>"$RAW/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 300); do
      curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null 2>&1 && break
      sleep 0.1
    done
    log "round $round, tracing $mode"
    rc=0
    "$BUILD/ptperf" -u "127.0.0.1:$PORT" -p "$INTERVAL_MS" -q --server-pid "$SERVER_PID" \
      -m tiny --concurrency 1,4 -f "$RAW/$mode.$round.csv" || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]
    stop_server
    n=$(cat "$WORK"/traces/*.json.* 2>/dev/null | grep -c '"timestamps"' || true)
    echo "traces_${mode}_${round}=$n" >>"$RAW/meta.txt"
  done
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"

mkdir -p "$RESULTS/raw"
cp "$RAW"/*.csv "$RAW/meta.txt" "$RESULTS/raw/"
"$PY" "$ROOT/bench/trace/report.py" "$RESULTS/raw" "$RESULTS"
log "report in $RESULTS/results.md"
