#!/usr/bin/env bash
# bench/gpu/wait_ab.sh [RAW_DIR] — how the instance thread waits for the
# GPU (PTSERVE_CUDA_WAIT=block|spin|timed, torch_bridge.cc wait_end), A/B
# in one run on the GPU host (issue 12, parts 5 and 8): for each mode a
# fresh server, then ptperf over HTTP on the FP16 ResNet-50 with a CUDA
# graph at batch 1 (concurrency 1: the latency target), with its input in
# system and in CUDA shared memory, and the eager FP16 ResNet-50 at
# concurrency 1 and 512 (CPU at c=1, throughput at saturation). Then the
# small MLP (mlp_b1: one instance, batches of one, tens of microseconds on
# the device) over HTTP and gRPC at concurrency 1 and 4, in each mode and in
# timed with its spin for small batches off (PTSERVE_CUDA_SPIN_BELOW_US=0,
# the wait before that spin). The in-process graph at batch 1 and the
# in-process MLP are the references, in the same run.
# bench/gpu/wait_report.py turns RAW_DIR into a table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAW="${1:-$ROOT/bench/gpu/results/wait-ab}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-gpu}"
MODELS="${BENCH_MODELS:-/tmp/pts-bench-gpu-models}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
PY="${PYTHON:-python3}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct
source "$ROOT/bench/gpu/lib.sh"  # gpu_meta, gpu_build, find_cudart, start_server, ptperf
trap stop_server EXIT
[ -d "$ROOT/.bundle/debs" ] && source "$ROOT/scripts/use-bundle.sh"
mkdir -p "$RAW"
gpu_build
[ -d "$MODELS/mlp_b1" ] || "$PY" "$ROOT/bench/gpu/gen_models.py" "$MODELS"
gpu_meta
CUDART="$(find_cudart)"

echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
"$BUILD/bench_inproc" --device cuda:0 --model "$MODELS/resnet50_fp16/1/model.pt" \
  --input FP16:1,3,224,224 --graph --label graph_b1 --seconds 3 --warmup 50 \
  --csv "$RAW/inproc.csv" >/dev/null
"$BUILD/bench_inproc" --device cuda:0 --model "$MODELS/mlp_b1/1/model.pt" \
  --input FP32:1,64 --label mlp_b1 --seconds 3 --warmup 200 \
  --csv "$RAW/inproc.csv" >/dev/null

export BENCH_MAX_TRIALS="${BENCH_MAX_TRIALS:-4}"
for mode in block spin timed timed-nospin; do
  below=200
  [ "$mode" = timed-nospin ] && below=0
  PTSERVE_CUDA_WAIT=${mode%-nospin} PTSERVE_CUDA_SPIN_BELOW_US=$below start_server "$MODELS" "$mode"
  log "mode $mode"
  ptperf -m mlp_b1 --concurrency 1,4 -f "$RAW/$mode-mlp-http.csv"
  ptperf -m mlp_b1 --concurrency 1,4 -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" \
    -f "$RAW/$mode-mlp-grpc.csv"
  # The ResNet's batches take about a millisecond: the small-batch spin
  # never applies, so timed-nospin would only repeat timed there.
  if [ "$mode" = timed-nospin ]; then stop_server; continue; fi
  ptperf -m resnet50_fp16_graph --concurrency 1 -f "$RAW/$mode-graph-http.csv"
  ptperf -m resnet50_fp16_graph --concurrency 1 --shared-memory system -f "$RAW/$mode-graph-shm.csv"
  [ -z "$CUDART" ] || PTPERF_CUDART="$CUDART" ptperf -m resnet50_fp16_graph --concurrency 1 \
    --shared-memory cuda -f "$RAW/$mode-graph-cudashm.csv"
  ptperf -m resnet50_fp16 --concurrency 1,512 -f "$RAW/$mode-fp16-http.csv"
  stop_server
done
log "done: $RAW"
