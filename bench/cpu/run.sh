#!/usr/bin/env bash
# bench/cpu/run.sh — ptserve on the CPU, over HTTP and gRPC, against LibTorch
# alone.
#
#   bench/cpu/run.sh            (or: make bench)
#
# 1. builds ptserve, tools/ptperf and bench_inproc (Release) in build-bench/;
# 2. generates the models (bench/cpu/gen_models.py → bench/cpu/models/);
# 3. serves them with ptserve and, in the same run, measures
#    - each model's forward() alone, in process, at batch 1 (bench_inproc),
#    - mlp and add_sub at concurrency 1, 2, 4, 8 (ptperf), each over HTTP,
#      gRPC ModelInfer and gRPC ModelStreamInfer, one after the other,
#    - mlp at the same concurrencies with NVIDIA's perf_analyzer, over each
#      protocol right after ptperf's sweep of it (the same server),
#    - mlp and deep with and without dynamic batching at concurrency 8, over
#      the same three,
#    - mlp at concurrency 1 and 4 once more with the server and the client
#      pinned to one core (taskset -c 0), to show what moving work between
#      cores costs;
# 4. writes bench/cpu/results/{results.md,results.csv,plot.png}
#    (bench/cpu/report.py) — raw ptperf CSVs stay in bench/cpu/raw/.
#
# Client, server and LibTorch share this machine's cores: compare ratios
# within one run, not absolute numbers across machines or runs.
#
# Before measuring, it waits (up to BENCH_QUIET_WAIT seconds, default 180)
# for the machine to be nearly idle, and records how busy it was.
#
# Environment: BENCH_INTERVAL_MS (window, default 2000), BENCH_BUILD_DIR,
# BENCH_RESULTS (output folder), BENCH_QUIET_WAIT, JOBS (build parallelism),
# PERF_ANALYZER (default: the project venv's, scripts/setup.sh; the
# perf_analyzer rows are left out, with a note, when it is missing),
# PTS_VENV (the project venv, where perf_analyzer is looked for), PYTHON
# (default: the project venv's; it writes the models and the report).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
MODELS="$ROOT/bench/cpu/models"
RAW="$ROOT/bench/cpu/raw"
RESULTS="${BENCH_RESULTS:-$ROOT/bench/cpu/results}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-2000}"
PY=${PYTHON:-$ROOT/.venv/bin/python}  # the project venv (scripts/setup.sh)
PERF_ANALYZER="${PERF_ANALYZER:-${PTS_VENV:-$ROOT/.venv}/bin/perf_analyzer}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct

wait_quiet() {
  local deadline=$((SECONDS + ${BENCH_QUIET_WAIT:-180})) busy
  while :; do
    busy="$(cpu_busy_pct)"
    if [ "$busy" -le 15 ] || [ "$SECONDS" -ge "$deadline" ]; then break; fi
    log "machine ${busy}% busy; waiting for it to be quiet"
  done
  echo "$busy"
}
trap stop_server EXIT

# Starts ptserve (with a command prefix such as "taskset -c 0", if given)
# and waits until it is ready.
start_server() {
  log "$* ptserve ${SERVER_ARGS[*]}"
  "$@" "$BUILD/ptserve" "${SERVER_ARGS[@]}" >>"$RAW/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    if curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready"; then return 0; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "run.sh: ptserve exited; its log:" >&2
      cat "$RAW/server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready"
}

log "build (Release) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null
if ! cmake --build "$BUILD" --target bench_inproc -j"${JOBS:-2}" >/dev/null 2>&1; then
  echo "run.sh: bench_inproc needs the pytorch backend: is LibTorch installed (scripts/setup.sh)?" >&2
  exit 1
fi

log "models in $MODELS"
rm -rf "$MODELS" "$RAW"
mkdir -p "$RAW" "$RESULTS"
"$PY" "$ROOT/bench/cpu/gen_models.py" "$MODELS" >/dev/null

# Every port the server opens is a free one.
PORT="$(free_port)"
GRPC_PORT="$(free_port)"
SERVER_ARGS=(--model-repository "$MODELS" --http-port "$PORT" --grpc-port "$GRPC_PORT")
HELP="$("$BUILD/ptserve" --help 2>&1 || true)"
if grep -q -- '--metrics-port' <<<"$HELP"; then SERVER_ARGS+=(--metrics-port "$(free_port)"); fi

start_server

BUSY_BEFORE="$(wait_quiet)"
{
  echo "busy_before=$BUSY_BEFORE"
  echo "command=BENCH_INTERVAL_MS=$INTERVAL_MS BENCH_QUIET_WAIT=${BENCH_QUIET_WAIT:-180} bench/cpu/run.sh"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo +changes)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$(nproc)"
  echo "interval_ms=$INTERVAL_MS"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "server_args=${SERVER_ARGS[*]:2}"
} >"$RAW/meta.txt"

log "in-process LibTorch, batch 1 (one thread, forward() back to back)"
echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
inproc() {
  local label="$1" model="$2"
  shift 2
  "$BUILD/bench_inproc" --model "$MODELS/$model/1/model.pt" "$@" --label "$label" \
    --csv "$RAW/inproc.csv" | tee -a "$RAW/inproc.log"
}
inproc mlp mlp --input FP32:1,16
inproc add_sub add_sub --input FP32:1,16 --input FP32:1,16
inproc deep deep --input FP32:1,16
inproc deep_batch8 deep --input FP32:8,16
echo "libtorch=$(sed -n 's/.*(LibTorch \(.*\))$/\1/p' "$RAW/inproc.log" | head -n1)" >>"$RAW/meta.txt"

# ptperf exits 2 when some requests failed: the report shows the errors.
# PTPERF_PREFIX (e.g. "taskset -c 0") runs it under a command.
PTPERF_PREFIX=()
ptperf() {
  local rc=0
  "${PTPERF_PREFIX[@]}" "$BUILD/ptperf" -u "127.0.0.1:$PORT" -p "$INTERVAL_MS" -q \
    --server-pid "$SERVER_PID" "$@" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]
}
# The protocols, one after the other for each model, so that a change in
# the machine's load touches them alike. The server breakdown always comes
# from the HTTP statistics endpoint (-u).
PROTOCOLS=(http grpc grpc_stream)
protocol_args() {
  case "$1" in
    http) ;;
    grpc) echo "-i grpc --grpc-url 127.0.0.1:$GRPC_PORT" ;;
    grpc_stream) echo "-i grpc --streaming --grpc-url 127.0.0.1:$GRPC_PORT" ;;
  esac
}
# perf_analyzer (NVIDIA's client, scripts/setup.sh) on the same server:
# the same windows and stability rule as ptperf (-p, 3 windows within 10%,
# at most 10), one run per concurrency (its --concurrency-range steps
# linearly). Random inputs, binary tensors over HTTP, as ptperf. A run that
# never settles or fails is logged, leaves no row and is listed in
# perf_analyzer_failed.txt (the report names it).
pa_args() {
  case "$1" in
    http) echo "-i http -u 127.0.0.1:$PORT" ;;
    grpc) echo "-i grpc -u 127.0.0.1:$GRPC_PORT" ;;
    grpc_stream) echo "-i grpc --streaming -u 127.0.0.1:$GRPC_PORT" ;;
  esac
}
perf_analyzer_sweep() {
  local m="$1" p="$2" c
  [ -x "$PERF_ANALYZER" ] || return 0
  for c in 1 2 4 8; do
    log "perf_analyzer $m over $p, concurrency $c"
    # shellcheck disable=SC2046
    if ! "$PERF_ANALYZER" -m "$m" $(pa_args "$p") --concurrency-range "$c" \
          -p "$INTERVAL_MS" -s 10 -r 10 -f "$RAW/perf_analyzer_${p}_${m}_c$c.csv" \
          >>"$RAW/perf_analyzer.log" 2>&1; then
      echo "run.sh: perf_analyzer $m over $p at concurrency $c failed; see $RAW/perf_analyzer.log" >&2
      rm -f "$RAW/perf_analyzer_${p}_${m}_c$c.csv"
      echo "$p $m $c" >>"$RAW/perf_analyzer_failed.txt"
    fi
  done
}
if [ -x "$PERF_ANALYZER" ]; then
  echo "perf_analyzer=$("$PERF_ANALYZER" --version 2>&1 | head -n1)" >>"$RAW/meta.txt"
else
  echo "run.sh: no perf_analyzer at $PERF_ANALYZER (scripts/setup.sh installs it); its rows are left out" >&2
  echo "perf_analyzer=missing" >>"$RAW/meta.txt"
fi

for m in mlp add_sub; do
  for p in "${PROTOCOLS[@]}"; do
    log "ptperf $m over $p, concurrency 1,2,4,8"
    # shellcheck disable=SC2046  # the arguments are words on purpose
    ptperf -m "$m" $(protocol_args "$p") --concurrency 1,2,4,8 -f "$RAW/ptperf_${p}_$m.csv"
    if [ "$m" = mlp ]; then perf_analyzer_sweep "$m" "$p"; fi
  done
done
for m in mlp_dyn deep deep_dyn; do
  for p in "${PROTOCOLS[@]}"; do
    log "ptperf $m over $p, concurrency 8"
    # shellcheck disable=SC2046
    ptperf -m "$m" $(protocol_args "$p") --concurrency 8 -f "$RAW/ptperf_${p}_$m.csv"
  done
done
stop_server

if command -v taskset >/dev/null; then
  log "mlp again, server and client on one core (taskset -c 0)"
  start_server taskset -c 0
  PTPERF_PREFIX=(taskset -c 0)
  ptperf -m mlp --concurrency 1,4 -f "$RAW/pinned_mlp.csv"
  PTPERF_PREFIX=()
  stop_server
fi
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"
echo "busy_after=$(cpu_busy_pct)" >>"$RAW/meta.txt"

log "report in $RESULTS"
"$PY" "$ROOT/bench/cpu/report.py" "$RAW" "$RESULTS"
