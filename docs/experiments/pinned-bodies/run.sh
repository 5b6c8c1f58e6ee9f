#!/usr/bin/env bash
# docs/experiments/pinned-bodies/run.sh — on the GPU host: batch-1 latency of
# the FP16 ResNet-50 CUDA-graph model (bench/gpu/gen_models.py's
# resnet50_fp16_graph) with request bodies read into pinned memory
# (core/pinned.h) against the same tree without that change, in alternating
# rounds; then the GPU test of the change. A question asked once (issue 46,
# part 4): the answer is in docs/gpu.md.
#
#   run.sh PATCH RAW    PATCH: the change (git diff); the base tree is this
#                       one with it reversed. RAW: where the results go.
#
# LOAD=batch1 (default): resnet50_fp16_graph at concurrency 1, HTTP binary
# and gRPC, three rounds, then the GPU test. LOAD=saturation: resnet50_fp16
# (padded graphs, 2 instances) at concurrency 256 and 512 over gRPC (4
# channels) and HTTP, two rounds: does reading bodies into pinned memory
# cost anything when batches are large (they are gathered into staging
# either way)?
#
# Leaves the new build in build-bench-gpu (ptserve, ptperf, bench_inproc,
# aoti_ref), so bench/gpu/run.sh can follow with BENCH_PREBUILT=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
PATCH="$(realpath "$1")"
RAW="$2"
PY="${PYTHON:-python3}"
INTERVAL_MS=1000
SERVER_PID=
source bench/lib.sh
source bench/gpu/lib.sh
trap stop_server EXIT
[ -d .bundle/debs ] && source scripts/use-bundle.sh
mkdir -p "$RAW"

log "base tree: this one with $PATCH reversed"
BASE=/tmp/pts-base
if [ ! -x "$BASE/build/ptserve" ]; then # (a second call on the same machine has it)
  rm -rf "$BASE" && mkdir -p "$BASE"
  tar --exclude='./build*' --exclude=./.bundle --exclude=./.git -cf - . | tar -xf - -C "$BASE"
  (cd "$BASE" && patch -s -R -p1 <"$PATCH")
fi
TP="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
build() { # SRC BUILD TARGETS...
  local src="$1" dir="$2"; shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$TP" >"$dir.cmake.log" 2>&1 &&
    cmake --build "$dir" --target "$@" -j8 >"$dir.build.log" 2>&1
}
log "builds (Release), new and base at once"
build "$ROOT" "$ROOT/build-bench-gpu" ptserve ptperf bench_inproc aoti_ref & new=$!
build "$BASE" "$BASE/build" ptserve & base=$!
wait "$new" || { tail -30 "$ROOT/build-bench-gpu.build.log"; exit 1; }
wait "$base" || { tail -30 "$BASE/build.build.log"; exit 1; }
log "builds done"
cp "$ROOT/build-bench-gpu/ptperf" "$BASE/build/ptperf"  # one client for both

MODELS=/tmp/pts-pinned-models
rm -rf "$MODELS" /tmp/pts-pinned-repo
"$PY" bench/gpu/gen_models.py "$MODELS" >"$RAW/gen.log" 2>&1
mkdir -p /tmp/pts-pinned-repo
LOAD="${LOAD:-batch1}"
if [ "$LOAD" = saturation ]; then
  cp -r "$MODELS/resnet50_fp16" /tmp/pts-pinned-repo/
  m=resnet50_fp16
  for round in 1 2; do
    for v in base new; do
      if [ "$v" = new ]; then BUILD="$ROOT/build-bench-gpu"; else BUILD="$BASE/build"; fi
      start_server /tmp/pts-pinned-repo "$v-$round"
      log "round $round, $v: gRPC (4 channels) and HTTP, concurrency 256 and 512"
      ptperf -m "$m" -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" --grpc-channels 4 \
        --concurrency 256,512 -f "$RAW/${v}_sat_grpc_$round.csv"
      ptperf -m "$m" --concurrency 256,512 -f "$RAW/${v}_sat_http_$round.csv"
      stop_server
    done
  done
  tar -C "$RAW" -czf "$RAW.tgz" .
  log "done: $RAW.tgz"
  exit 0
fi
cp -r "$MODELS/resnet50_fp16_graph" /tmp/pts-pinned-repo/

m=resnet50_fp16_graph
for round in 1 2 3; do
  for v in base new; do
    if [ "$v" = new ]; then BUILD="$ROOT/build-bench-gpu"; else BUILD="$BASE/build"; fi
    start_server /tmp/pts-pinned-repo "$v-$round"
    log "round $round, $v: HTTP binary and gRPC, concurrency 1"
    ptperf -m "$m" --concurrency 1 -f "$RAW/${v}_http_$round.csv"
    ptperf -m "$m" -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" --concurrency 1 \
      -f "$RAW/${v}_grpc_$round.csv"
    curl -s "http://127.0.0.1:$PORT/v2/models/$m/stats" >"$RAW/${v}_stats_$round.json"
    stop_server
  done
done
grep -h "pinned host memory" "$RAW"/server-new-1.log >"$RAW/pinned-log-line.txt" || true

log "GPU test of the change"
export PTSERVE_BIN="$ROOT/build-bench-gpu/ptserve" PTS_MODELS_PYTHON="$PY"
if ls .bundle/wheels/*.whl >/dev/null 2>&1; then export PYTHONPATH="$ROOT/.bundle/py${PYTHONPATH:+:$PYTHONPATH}"; fi
"$PY" -m pytest -q -p no:cacheprovider tests/gpu/test_cuda.py -k "pinned or add_sub" \
  >"$RAW/pytest.log" 2>&1 || true
tail -5 "$RAW/pytest.log"
log "done: $RAW"
