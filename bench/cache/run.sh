#!/usr/bin/env bash
# bench/cache/run.sh — what the response cache gives and costs, in one run.
#
#   bench/cache/run.sh
#
# 1. builds ptserve and tools/ptperf (Release, LibTorch) in build-bench/;
# 2. writes bench/cpu's `mlp` (a 16 -> 4 MLP, about 3 us of forward) and
#    `deep` (24 x Linear(16, 16) + ReLU, about 60 us) twice each into a
#    repository: as they are, and as `<name>_cached` with
#    response_cache { enable: true } (the same model.pt);
# 3. serves that repository from two servers side by side, A with a 64
#    MiB cache and B with room for two answers at most, and for ROUNDS
#    rounds, for each model, measures four modes one after the other (the
#    order turning each round) with ptperf over HTTP at concurrency 1 and
#    4, its 16 different requests in turn:
#      off    the model without response_cache, on A;
#      hit    <name>_cached on A: after the first 16 requests every request
#             is a hit;
#      off_b  the model without response_cache, on B;
#      miss   <name>_cached on B: ptperf's 16 requests in turn evict each
#             other (least recently used goes first), so every request is
#             a miss that makes its key, looks it up, runs the model and
#             stores its answer (what the cache costs a model whose
#             requests do not repeat);
#    hit is compared with off, and miss with off_b: each pair in one
#    server process, so that nothing but the cache differs between them;
# 4. writes bench/cache/results/{results.md,results.csv,plot.png}
#    (report.py), ptperf's CSVs and the servers' statistics in
#    results/raw/ (not committed): medians over rounds, and each mode's
#    ratio to its pair's no-cache mode in this run. The two servers run side by side; the
#    client, the server and LibTorch share this machine's cores, so read
#    the ratios, not the absolute numbers.
#
# Environment: BENCH_INTERVAL_MS (window, default 1000), BENCH_ROUNDS (3),
# BENCH_BUILD_DIR, JOBS, PYTHON.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
OUT="$ROOT/bench/cache/results"
RAW="$OUT/raw"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
ROUNDS="${BENCH_ROUNDS:-3}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
SERVER_PID=
MISS_PID=
source "$ROOT/bench/lib.sh" # log, stop_server, free_port, wait_ready

cleanup() {
  stop_server
  if [ -n "$MISS_PID" ]; then kill "$MISS_PID" 2>/dev/null || true; wait "$MISS_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

log "build (Release) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
  -DPTS_PYTHON="$PY" >/dev/null
cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null

rm -rf "$RAW"
mkdir -p "$RAW/all" "$RAW/models"
"$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
for m in mlp deep; do
  mv "$RAW/all/$m" "$RAW/models/$m"
  cp -r "$RAW/models/$m" "$RAW/models/${m}_cached"
  sed -i "s/^name: \"$m\"/name: \"${m}_cached\"/" "$RAW/models/${m}_cached/config.pbtxt"
  printf 'response_cache { enable: true }\n' >>"$RAW/models/${m}_cached/config.pbtxt"
done
rm -rf "$RAW/all"

start() { # PORT CACHE_BYTES LOG -> pid on stdout
  "$BUILD/ptserve" --model-repository "$RAW/models" --http-port "$1" --http-address 127.0.0.1 \
    --allow-grpc false --allow-metrics false --cache-config "local,size=$2" >"$3" 2>&1 &
  echo $!
}
PORT="$(free_port)"
SERVER_PID="$(start "$PORT" $((64 << 20)) "$RAW/server.log")"
wait_ready "http://127.0.0.1:$PORT/v2/health/ready" "$SERVER_PID" "$RAW/server.log"
# Room for two answers at most of either model (an entry is about 450
# bytes: the key, the outputs and the bookkeeping; docs/response-cache.md),
# fewer than ptperf's 16 requests.
MISS_PORT="$(free_port)"
MISS_PID="$(start "$MISS_PORT" 1100 "$RAW/server-miss.log")"
wait_ready "http://127.0.0.1:$MISS_PORT/v2/health/ready" "$MISS_PID" "$RAW/server-miss.log"

{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src || echo +changes)"
  echo "cpus=$(nproc)"
  echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "interval_ms=$INTERVAL_MS"
  echo "rounds=$ROUNDS"
} >"$RAW/meta.txt"

modes=(off hit off_b miss)
for round in $(seq 1 "$ROUNDS"); do
  for m in mlp deep; do
    for i in 0 1 2 3; do
      mode=${modes[$(((i + round) % 4))]}
      case $mode in
        off) port=$PORT pid=$SERVER_PID model=$m ;;
        hit) port=$PORT pid=$SERVER_PID model=${m}_cached ;;
        off_b) port=$MISS_PORT pid=$MISS_PID model=$m ;;
        miss) port=$MISS_PORT pid=$MISS_PID model=${m}_cached ;;
      esac
      log "round $round, $m, $mode"
      rc=0
      "$BUILD/ptperf" -u "127.0.0.1:$port" -p "$INTERVAL_MS" -q --server-pid "$pid" \
        -m "$model" --concurrency 1,4 -f "$RAW/$m.$mode.$round.csv" || rc=$?
      [ "$rc" -eq 0 ]
    done
  done
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"
for m in mlp deep; do
  curl -sf "http://127.0.0.1:$PORT/v2/models/${m}_cached/stats" >"$RAW/stats_hit_$m.json"
  curl -sf "http://127.0.0.1:$MISS_PORT/v2/models/${m}_cached/stats" >"$RAW/stats_miss_$m.json"
  curl -sf "http://127.0.0.1:$PORT/v2/models/$m/stats" >"$RAW/stats_off_$m.json"
  curl -sf "http://127.0.0.1:$MISS_PORT/v2/models/$m/stats" >"$RAW/stats_off_b_$m.json"
done
"$PY" "$ROOT/bench/cache/report.py" "$RAW" "$OUT"
cat "$OUT/results.md"
