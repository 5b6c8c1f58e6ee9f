#!/usr/bin/env bash
# bench/threads/run.sh — how many HTTP loops and gRPC completion-queue
# threads suit this machine: the same model and client at each thread count,
# in one run, so that the defaults of --http-thread-count and
# --grpc-infer-thread-count rest on a measurement (issue #13, part 5).
#
#   bench/threads/run.sh [RAW_DIR]          (default bench/threads/raw)
#
# For each protocol and each thread count a fresh server (only that count
# changes); ptperf at each concurrency, with --server-pid for the server's
# CPU per request. bench/threads/report.py turns RAW_DIR into a table whose
# ratios are to the first thread count of the same protocol and concurrency.
#
# Environment:
#   PTSERVE, PTPERF   binaries (default build-bench/, built Release if absent)
#   MODELS, MODEL     repository and model (default: bench/cpu/gen_models.py's
#                     mlp, the 16 -> 4 MLP of bench/cpu/hotpath.sh)
#   HTTP_THREADS      --http-thread-count values (default "1 2 <cores>"; empty: none)
#   GRPC_THREADS      --grpc-infer-thread-count values (default "1 2 4"; empty: none)
#   CONCURRENCY       ptperf concurrencies (default "1 4 16 64")
#   GRPC_CHANNELS     connections ptperf's gRPC calls share (default 4)
#   BENCH_INTERVAL_MS, BENCH_MAX_TRIALS   ptperf windows (default 1000, 3)
#   PTPERF_EXTRA      more ptperf flags (e.g. --shared-memory system)
#   SERVER_EXTRA      more ptserve flags
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAW="${1:-$ROOT/bench/threads/raw}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
PTSERVE="${PTSERVE:-$BUILD/ptserve}"
PTPERF="${PTPERF:-$BUILD/ptperf}"
MODEL="${MODEL:-mlp}"
CORES="$(nproc)"
HTTP_THREADS="${HTTP_THREADS-$(printf '%s\n' 1 2 "$CORES" | sort -nu | tr '\n' ' ')}"
GRPC_THREADS="${GRPC_THREADS-1 2 4}"
CONCURRENCY="${CONCURRENCY:-1 4 16 64}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct
trap stop_server EXIT

if [ ! -x "$PTSERVE" ] || [ ! -x "$PTPERF" ]; then
  log "build (Release) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" >/dev/null
  cmake --build "$BUILD" --target ptserve ptperf -j"$CORES" >/dev/null
fi

rm -rf "$RAW"
mkdir -p "$RAW"
MODELS="${MODELS:-}"
if [ -z "$MODELS" ]; then
  MODELS="$RAW/models"
  "$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
  mkdir -p "$MODELS" && mv "$RAW/all/mlp" "$MODELS/" && rm -rf "$RAW/all"
fi
{
  echo "command=bench/threads/run.sh $*"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo +changes)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$CORES"
  echo "model=$MODEL"
  echo "settings=HTTP_THREADS=\"$HTTP_THREADS\" GRPC_THREADS=\"$GRPC_THREADS\" CONCURRENCY=\"$CONCURRENCY\""
  echo "grpc_channels=${GRPC_CHANNELS:-4}"
  echo "ptperf_extra=${PTPERF_EXTRA:-}"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/meta.txt"

start_server() { # FLAG VALUE
  PORT="$(free_port)"
  GRPC_PORT="$(free_port)"
  # shellcheck disable=SC2086
  "$PTSERVE" --model-repository "$MODELS" --http-port "$PORT" --http-address 127.0.0.1 \
    --grpc-port "$GRPC_PORT" --metrics-port "$(free_port)" --allow-client-shm=true \
    "$1" "$2" ${SERVER_EXTRA:-} >>"$RAW/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 1200); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/models/$MODEL/ready" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$RAW/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "bench/threads: the server did not become ready" >&2
  exit 1
}

for proto in http grpc; do
  if [ "$proto" = http ]; then counts="$HTTP_THREADS" flag=--http-thread-count
  else counts="$GRPC_THREADS" flag=--grpc-infer-thread-count; fi
  for t in $counts; do
    start_server "$flag" "$t"
    args=()
    [ "$proto" = grpc ] && args=(-i grpc --grpc-url "127.0.0.1:$GRPC_PORT" --grpc-channels "${GRPC_CHANNELS:-4}")
    log "$proto, $flag $t, concurrency $CONCURRENCY"
    rc=0
    # shellcheck disable=SC2086
    "$PTPERF" -m "$MODEL" -u "127.0.0.1:$PORT" "${args[@]}" -p "$INTERVAL_MS" \
      -r "${BENCH_MAX_TRIALS:-3}" -q --server-pid "$SERVER_PID" ${PTPERF_EXTRA:-} \
      --concurrency "$(echo $CONCURRENCY | tr ' ' ,)" -f "$RAW/ptperf_${proto}_t${t}.csv" \
      >>"$RAW/ptperf.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || { echo "bench/threads: ptperf failed ($rc)" >&2; exit 1; }
    stop_server
  done
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"
"$PY" "$ROOT/bench/threads/report.py" "$RAW" "${OUT:-$ROOT/bench/threads/results/local}"
