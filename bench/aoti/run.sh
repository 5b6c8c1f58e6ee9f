#!/usr/bin/env bash
# bench/aoti/run.sh — AOTInductor packages against TorchScript, the same
# models, in process and served by ptserve (issue 10, part 7).
#
#   bench/aoti/run.sh [--device cpu|cuda] [RESULTS_DIR]
#
# 1. builds ptserve, ptperf and bench_inproc (Release) in build-bench-aoti/;
# 2. writes each model of bench/aoti/gen_models.py twice, TorchScript and
#    AOTInductor, from the same module and weights;
# 3. measures, at batch 1 and 8 (cpu) or 1, 8 and 32 (cuda), one call at a
#    time, in BENCH_ROUNDS (default 3) interleaved rounds, keeping each
#    variant's best round:
#    - eager PyTorch in process (bench/aoti/eager.py, Python),
#    - TorchScript in process and AOTInductor in process (bench_inproc, through
#      the same bridge ptserve uses),
#    - ptserve TorchScript and ptserve AOTInductor over HTTP, binary tensors,
#      concurrency 1 (ptperf);
# 4. bench/aoti/report.py writes RESULTS_DIR/{results.md,results.csv,plot.png}
#    (default bench/aoti/results for cpu, bench/aoti/results-cuda for cuda).
#
# On the CPU every variant uses one intra-op thread (the server and the client
# share the machine). Compare the columns of one run, not runs across hosts.
# Environment: PYTHON (default .venv/bin/python), BENCH_INTERVAL_MS (ptperf
# window, default 2000), BENCH_ROUNDS, BENCH_BUILD_DIR, JOBS (build parallelism).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEVICE=cpu
if [ "${1:-}" = "--device" ]; then DEVICE="$2"; shift 2; fi
case "$DEVICE" in cpu | cuda) ;; *) echo "run.sh: --device cpu|cuda" >&2; exit 2 ;; esac
SUFFIX=; [ "$DEVICE" = cpu ] || SUFFIX=-cuda
RESULTS="${1:-$ROOT/bench/aoti/results$SUFFIX}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-aoti}"
MODELS="$ROOT/bench/aoti/models-$DEVICE"
RAW="$ROOT/bench/aoti/raw-$DEVICE"
INTERVAL_MS="${BENCH_INTERVAL_MS:-2000}"
ROUNDS="${BENCH_ROUNDS:-3}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct, wait_ready
trap stop_server EXIT
if [ -d "$ROOT/.bundle/debs" ] && ! pkg-config --exists libevent 2>/dev/null; then
  source "$ROOT/scripts/use-bundle.sh"
fi
log "build (Release) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF -DPTS_PYTHON="$PY" \
  -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" >/dev/null
cmake --build "$BUILD" --target ptserve ptperf bench_inproc -j"${JOBS:-$(nproc)}" >/dev/null

log "models in $MODELS (AOTInductor compiles C++: minutes)"
rm -rf "$MODELS" "$RAW"
mkdir -p "$RAW" "$RESULTS"
"$PY" "$ROOT/bench/aoti/gen_models.py" "$MODELS" --device "$DEVICE" >"$RAW/gen.log" 2>&1 ||
  { cat "$RAW/gen.log" >&2; exit 1; }
if [ "$DEVICE" = cpu ]; then
  NAMES=(mlp cnn); BATCHES=(1 8); INPROC_DEV=(--threads 1)
else
  NAMES=(resnet50_fp16 mlp); BATCHES=(1 8 32); INPROC_DEV=(--device cuda:0)
fi
dims() { sed -n 's/^input.*dims: \[ \([^]]*\) \].*/\1/p' "$MODELS/$1/config.pbtxt" | tr -d ' '; }
wire() { grep -q TYPE_FP16 "$MODELS/$1/config.pbtxt" && echo FP16 || echo FP32; }
{
  echo "device=$DEVICE"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo +changes)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$(nproc)"
  if [ "$DEVICE" = cuda ]; then
    echo "gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  fi
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__)')"
  echo "interval_ms=$INTERVAL_MS"
  echo "rounds=$ROUNDS"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/meta.txt"

echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
inproc_round() {
  for n in "${NAMES[@]}"; do
    for b in "${BATCHES[@]}"; do
      "$PY" "$ROOT/bench/aoti/eager.py" "$n" "$b" --device "$DEVICE" --csv "$RAW/inproc.csv" >>"$RAW/inproc.log" 2>&1
      for k in ts aoti; do
        f=model.pt; [ "$k" = aoti ] && f=model.pt2
        "$BUILD/bench_inproc" --model "$MODELS/${n}_$k/1/$f" --input "$(wire "${n}_$k"):$b,$(dims "${n}_$k")" \
          "${INPROC_DEV[@]}" --seconds 2 --warmup 100 --label "$n/$k/b$b" --csv "$RAW/inproc.csv" >>"$RAW/inproc.log"
      done
    done
  done
}
served_round() {
  for n in "${NAMES[@]}"; do
    for b in "${BATCHES[@]}"; do
      for k in ts aoti; do
        rc=0
        "$BUILD/ptperf" -m "${n}_$k" -u "127.0.0.1:$PORT" -b "$b" --concurrency 1 -p "$INTERVAL_MS" -q \
          --server-pid "$SERVER_PID" -f "$RAW/ptperf_${n}_${k}_b${b}_r$1.csv" || rc=$?
        [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]
      done
    done
  done
}

PORT="$(free_port)"
"$BUILD/ptserve" --model-repository "$MODELS" --http-port "$PORT" --http-address 127.0.0.1 \
  --grpc-port "$(free_port)" --metrics-port "$(free_port)" >"$RAW/server.log" 2>&1 &
SERVER_PID=$!
wait_ready "http://127.0.0.1:$PORT/v2/health/ready" "$SERVER_PID" "$RAW/server.log"
# Rounds: every variant measured ROUNDS times, interleaved, so that a burst
# of load from elsewhere hits one round, not one variant; the report keeps
# each variant's best (lowest median) round.
for r in $(seq 1 "$ROUNDS"); do
  log "round $r/$ROUNDS: in process (eager, TorchScript, AOTInductor), then served (HTTP, concurrency 1)"
  inproc_round
  served_round "$r"
done
stop_server
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"

log "report in $RESULTS"
"$PY" "$ROOT/bench/aoti/report.py" "$RAW" "$RESULTS"
