#!/usr/bin/env bash
# bench/gpu/env_ab.sh [RAW_DIR] — two settings of the server's environment,
# A/B in one run on the GPU host: the small MLP (mlp_b1 of gen_models.py:
# one GPU instance, batches of one, tens of microseconds on the device)
# served once with each, a fresh server each time, alternating which goes
# first, for ROUNDS rounds; ptperf over HTTP and gRPC at the concurrencies
# CS. The same model in process (bench_inproc, the same bridge) under each
# setting is the reference. bench/gpu/env_report.py turns RAW_DIR into a
# table.
#
#   AB_A="name VAR=value ..."   the baseline (e.g. the previous behaviour)
#   AB_B="name VAR=value ..."   the change
#   AB_WHAT="..."               one sentence for the report: what differs
#   AB_MODEL, AB_INPUT          the model of gen_models.py and bench_inproc's
#                               --input (default mlp_b1, FP32:1,64)
#   AB_MODEL_WHAT="..."         the model in words, for the report
#   AB_GRPC_CHANNELS            ptperf's --grpc-channels (default 1)
#
# BUILD=DIR among a side's variables takes that side's ptserve, ptperf and
# bench_inproc from DIR: two builds A/B (bench/gpu/tree_ab.sh).
# bench/gpu/spin_ab.sh and bench/gpu/inline_ab.sh are two uses.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAW="${1:?usage: AB_A=... AB_B=... bench/gpu/env_ab.sh RAW_DIR}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-gpu}"
MODELS="${BENCH_MODELS:-/tmp/pts-bench-gpu-models}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
ROUNDS="${ROUNDS:-3}"
CS="${CS:-1,4}"
MODEL="${AB_MODEL:-mlp_b1}"
INPUT="${AB_INPUT:-FP32:1,64}"
CHANNELS="${AB_GRPC_CHANNELS:-1}"
PY="${PYTHON:-python3}"
read -r -a A <<<"${AB_A:?AB_A=\"name VAR=value ...\"}"
read -r -a B <<<"${AB_B:?AB_B=\"name VAR=value ...\"}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port
source "$ROOT/bench/gpu/lib.sh"  # gpu_meta, gpu_build, start_server, ptperf
trap stop_server EXIT
[ -d "$ROOT/.bundle/debs" ] && source "$ROOT/scripts/use-bundle.sh"
mkdir -p "$RAW"
gpu_build
[ -d "$MODELS/$MODEL" ] || "$PY" "$ROOT/bench/gpu/gen_models.py" "$MODELS"
# The servers load the one model alone: a fresh server per side and
# round, and the others beside it would only lengthen each start.
REPO="$RAW/repo"
rm -rf "$REPO" && mkdir -p "$REPO" && cp -r "$MODELS/$MODEL" "$REPO/"
gpu_meta
{
  echo "rounds=$ROUNDS"
  echo "a=${A[*]}"
  echo "b=${B[*]}"
  echo "what=${AB_WHAT:-}"
  echo "model=$MODEL"
  echo "model_what=${AB_MODEL_WHAT:-the 64 → 256 → 8 MLP on one GPU instance, batches of one}"
  echo "grpc_channels=$CHANNELS"
  echo "command=${AB_COMMAND:-$(basename "$0")}"
} >>"$RAW/meta.txt"

export BENCH_MAX_TRIALS="${BENCH_MAX_TRIALS:-6}"
echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
for round in $(seq 1 "$ROUNDS"); do
  order="A B"
  [ $((round % 2)) -eq 0 ] && order="B A"
  for side in $order; do
    if [ "$side" = A ]; then set -- "${A[@]}"; else set -- "${B[@]}"; fi
    name=$1
    shift
    (
      trap stop_server EXIT
      for kv in "$@"; do export "${kv?}"; done
      "$BUILD/bench_inproc" --device cuda:0 --model "$MODELS/$MODEL/1/model.pt" \
        --input "$INPUT" --label "$name-r$round" --seconds 2 --warmup 200 \
        --csv "$RAW/inproc.csv" >/dev/null
      start_server "$REPO" "$name-r$round"
      log "round $round: $name ($*)"
      ptperf -m "$MODEL" --concurrency "$CS" -f "$RAW/$name-r$round-http.csv"
      ptperf -m "$MODEL" --concurrency "$CS" -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" \
        --grpc-channels "$CHANNELS" -f "$RAW/$name-r$round-grpc.csv"
      stop_server
    )
  done
done
rm -rf "$REPO"
log "done: $RAW"
