#!/usr/bin/env bash
# bench/gpu/spin_ab.sh [RAW_DIR] — the timed wait's spin on small batches
# (torch_bridge.cc wait_end, PTSERVE_CUDA_SPIN_BELOW_US), A/B in one run on
# the GPU host: the small MLP (mlp_b1 of gen_models.py: one GPU instance,
# batches of one, tens of microseconds on the device) served with the
# default timed wait and with its spin off (PTSERVE_CUDA_SPIN_BELOW_US=0,
# the timed wait before the spin), a fresh server each, alternating which
# goes first, for ROUNDS rounds; ptperf over HTTP and gRPC at concurrency 1
# and 4. The same model in process (bench_inproc, the same bridge and
# wait) both ways is the reference. bench/gpu/spin_report.py turns RAW_DIR
# into a table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAW="${1:-$ROOT/bench/gpu/results/spin-ab}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-gpu}"
MODELS="${BENCH_MODELS:-/tmp/pts-bench-gpu-models}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
ROUNDS="${ROUNDS:-3}"
PY="${PYTHON:-python3}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port
source "$ROOT/bench/gpu/lib.sh"  # gpu_meta, gpu_build, start_server, ptperf
trap stop_server EXIT
[ -d "$ROOT/.bundle/debs" ] && source "$ROOT/scripts/use-bundle.sh"
mkdir -p "$RAW"
gpu_build
[ -d "$MODELS/mlp_b1" ] || "$PY" "$ROOT/bench/gpu/gen_models.py" "$MODELS"
gpu_meta
echo "rounds=$ROUNDS" >>"$RAW/meta.txt"

export BENCH_MAX_TRIALS="${BENCH_MAX_TRIALS:-6}"
echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
for round in $(seq 1 "$ROUNDS"); do
  order="spin nospin"
  [ $((round % 2)) -eq 0 ] && order="nospin spin"
  for mode in $order; do
    below=200
    [ "$mode" = nospin ] && below=0
    export PTSERVE_CUDA_WAIT=timed PTSERVE_CUDA_SPIN_BELOW_US=$below
    "$BUILD/bench_inproc" --device cuda:0 --model "$MODELS/mlp_b1/1/model.pt" \
      --input FP32:1,64 --label "$mode-r$round" --seconds 2 --warmup 200 \
      --csv "$RAW/inproc.csv" >/dev/null
    start_server "$MODELS" "$mode-r$round"
    log "round $round: $mode"
    ptperf -m mlp_b1 --concurrency 1,4 -f "$RAW/$mode-r$round-http.csv"
    ptperf -m mlp_b1 --concurrency 1,4 -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" \
      -f "$RAW/$mode-r$round-grpc.csv"
    stop_server
    unset PTSERVE_CUDA_WAIT PTSERVE_CUDA_SPIN_BELOW_US
  done
done
log "done: $RAW"
