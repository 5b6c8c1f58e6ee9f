#!/usr/bin/env bash
# bench/cpu/hotpath.sh — the CPU request path of this tree against a
# baseline build (issue #13), measured in the same run.
#
#   bench/cpu/hotpath.sh BASELINE_PTSERVE
#
# BASELINE_PTSERVE is a Release ptserve built from the commit to compare with
# (e.g. main's HEAD: git archive main | tar -x -C /tmp/base && cmake -S
# /tmp/base -B /tmp/base/b -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF &&
# cmake --build /tmp/base/b --target ptserve).
#
# 1. builds this tree's ptserve and ptperf (Release) in build-bench/;
# 2. writes the mlp model (bench/cpu/gen_models.py; only mlp is served);
# 3. ROUNDS times (default 2), alternating which server goes first so that a
#    change in the machine's load touches both alike: for each server, for
#    HTTP, gRPC ModelInfer and gRPC ModelStreamInfer (one stream per request
#    in flight), at concurrency 1 and 4:
#    - ptperf (windows until stable): infer/s, p50, server CPU per request
#      (/proc of the server);
#    - `perf stat -p` on the server over a further fixed window of requests:
#      context switches and CPU per request (software counters: this VM has
#      no hardware instruction counter, hence step 4), and the server's
#      kernel time over the same window (/proc/PID/stat), the request count
#      taken from the server's statistics endpoint (exact, whatever the
#      timing). These do not depend much on what else runs on the machine;
#      throughput and latency do.
# 4. instructions per request: each server once more under valgrind's
#    callgrind, instrumented only during a window of requests per protocol
#    and concurrency; the top symbols of this tree's server at HTTP c=1;
# 5. writes bench/cpu/hotpath/{results.md,results.csv,top_symbols.txt}
#    (bench/cpu/hotpath_report.py). Raw files stay in bench/cpu/hotpath/raw/.
#
# Each row of results.md is the median over the rounds.
#
# ROUNDS=0 runs step 4 alone and prints the instructions per request of
# both servers (an A/B of two builds in a few minutes); nothing under
# bench/cpu/hotpath/ but raw/ is written.
#
# Environment: ROUNDS, BENCH_INTERVAL_MS (default 1000), PERF_SECONDS (the
# perf stat window, default 3), CALLGRIND_MS (a third of the callgrind
# window, default 1000), JOBS, PYTHON, BENCH_BUILD_DIR, HOTPATH_OUT (the
# results folder, default bench/cpu/hotpath), SERVER_EXTRA
# (more ptserve flags for both servers), NEW_EXTRA and BASE_EXTRA (flags for
# one of them: `NEW_EXTRA="--http-thread-count 1" ROUNDS=0
# bench/cpu/hotpath.sh build-bench/ptserve` compares two settings of one
# build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_BIN="${1:?usage: bench/cpu/hotpath.sh BASELINE_PTSERVE}"
BASE_BIN="$(cd "$(dirname "$BASE_BIN")" && pwd)/$(basename "$BASE_BIN")"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
OUT="${HOTPATH_OUT:-$ROOT/bench/cpu/hotpath}"
RAW="$OUT/raw"
MODELS="$RAW/models"
PY=${PYTHON:-$ROOT/.venv/bin/python}
ROUNDS="${ROUNDS:-2}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
PERF_SECONDS="${PERF_SECONDS:-3}"
CALLGRIND_MS="${CALLGRIND_MS:-1000}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, model_answered, cpu_ticks, ptperf_proto_args

trap stop_server EXIT

start_server() { # LABEL COMMAND... (a ptserve, possibly behind valgrind)
  local extra="${BASE_EXTRA:-}"
  [ "$1" = new ] && extra="${NEW_EXTRA:-}"
  shift
  PORT="$(free_port)"
  GRPC_PORT="$(free_port)"
  # shellcheck disable=SC2086
  "$@" --model-repository "$MODELS" --http-port "$PORT" --grpc-port "$GRPC_PORT" \
    --metrics-port "$(free_port)" ${SERVER_EXTRA:-} $extra >>"$RAW/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 1200); do
    if curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/models/mlp/ready"; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RAW/server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "hotpath.sh: $* did not become ready" >&2
  exit 1
}

# Requests the server has answered for mlp (statistics endpoint).
answered() { model_answered "$PORT" mlp; }

measure() { # LABEL ROUND PROTO C
  local label="$1" round="$2" proto="$3" c="$4" rc=0
  local tag="${label}_r${round}_${proto}_c${c}"
  # shellcheck disable=SC2046
  "$BUILD/ptperf" -m mlp -u "127.0.0.1:$PORT" $(ptperf_proto_args "$proto" "$GRPC_PORT") -p "$INTERVAL_MS" -q \
    --concurrency "$c" --server-pid "$SERVER_PID" -f "$RAW/ptperf_$tag.csv" \
    >>"$RAW/ptperf.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { echo "hotpath.sh: ptperf failed ($rc), see $RAW/ptperf.log" >&2; exit 1; }
  # A fixed window under perf stat; ptperf keeps the load on meanwhile.
  # shellcheck disable=SC2046
  "$BUILD/ptperf" -m mlp -u "127.0.0.1:$PORT" $(ptperf_proto_args "$proto" "$GRPC_PORT") -q --no-server-stats \
    -p $(((PERF_SECONDS * 1000 + 1500) / 3)) -r 3 -s 100 --concurrency "$c" >/dev/null 2>&1 &
  local load=$!
  sleep 0.7
  # The requests and ticks are read by the command perf runs, so they
  # bracket exactly the time perf counts (read outside it, they took in
  # perf's own start-up, about half a second of requests it did not count).
  local win="$RAW/window_$tag.txt" window=(bash -c "$(declare -f model_answered cpu_ticks)"'
    PY="$1"; a0="$(model_answered "$2" mlp)"; t0="$(cpu_ticks "$3")"; sleep "$4"
    t1="$(cpu_ticks "$3")"; a1="$(model_answered "$2" mlp)"; echo "$a0 $t0 $a1 $t1"' _
    "$PY" "$PORT" "$SERVER_PID" "$PERF_SECONDS")
  if command -v perf >/dev/null; then
    perf stat -x, -e context-switches,cpu-migrations,task-clock -p "$SERVER_PID" \
      -o "$RAW/perfstat_$tag.txt" -- "${window[@]}" >"$win" 2>/dev/null || "${window[@]}" >"$win"
  else
    "${window[@]}" >"$win"
  fi
  local before u0 s0 after u1 s1 # requests answered, user and system ticks
  read -r before u0 s0 after u1 s1 <"$win"
  wait "$load" || true
  echo "$label,$round,$proto,$c,$((after - before)),$((u1 - u0)),$((s1 - s0))" \
    >>"$RAW/perfstat_counts.csv"
}

log "build (Release) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null

rm -rf "$RAW"
mkdir -p "$RAW" "$MODELS"
"$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
mv "$RAW/all/mlp" "$MODELS/"
rm -rf "$RAW/all"
echo "label,round,protocol,concurrency,requests,user_ticks,sys_ticks" >"$RAW/perfstat_counts.csv"
echo "label,protocol,concurrency,requests,instructions" >"$RAW/callgrind_counts.csv"
{
  echo "command=ROUNDS=$ROUNDS BENCH_INTERVAL_MS=$INTERVAL_MS PERF_SECONDS=$PERF_SECONDS${NEW_EXTRA:+ NEW_EXTRA=\"$NEW_EXTRA\"}${BASE_EXTRA:+ BASE_EXTRA=\"$BASE_EXTRA\"} bench/cpu/hotpath.sh $1"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo +changes)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cores=$(nproc)"
  echo "clk_tck=$(getconf CLK_TCK)"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/meta.txt"

for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then order="baseline new"; else order="new baseline"; fi
  for label in $order; do
    bin="$BUILD/ptserve"
    [ "$label" = baseline ] && bin="$BASE_BIN"
    start_server "$label" "$bin"
    for proto in http grpc stream; do
      for c in 1 4; do
        log "round $round: $label, $proto, concurrency $c"
        measure "$label" "$round" "$proto" "$c"
      done
    done
    stop_server
  done
done

# Instructions per request: each server under callgrind, instrumentation
# switched on only around a window of requests (not the start-up), the
# request count from the statistics endpoint. User-space instructions of
# every thread of the server; valgrind runs one thread at a time, so this
# counts work, not waiting or switching (context switches are above).
for label in baseline new; do
  bin="$BUILD/ptserve"
  [ "$label" = baseline ] && bin="$BASE_BIN"
  log "callgrind: $label"
  # Under valgrind the MLP's batches take some 50 times longer, past the
  # 1 ms up to which a frontend thread runs a model itself; natively they
  # run there (perf stat shows no instance-thread switches), so the limit
  # is raised to count the path the server really takes. Builds older than
  # PTSERVE_INLINE_MAX_US ignore it.
  PTSERVE_INLINE_MAX_US=100000 start_server "$label" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$RAW/callgrind_${label}.%p" "$bin"
  # Warm-up, uninstrumented: TorchScript's first runs profile and optimise
  # the graph, and every path should have run once.
  for proto in http grpc; do
    # shellcheck disable=SC2046
    "$BUILD/ptperf" -m mlp -u "127.0.0.1:$PORT" $(ptperf_proto_args "$proto" "$GRPC_PORT") -q --no-server-stats \
      -p 1000 -r 3 -s 100 --concurrency 4 >/dev/null 2>&1 || true
  done
  for proto in http grpc stream; do
    for c in 1 4; do
      rm -f "$RAW"/callgrind_"$label".*
      before="$(answered)"
      callgrind_control -i on "$SERVER_PID" >/dev/null
      # shellcheck disable=SC2046
      "$BUILD/ptperf" -m mlp -u "127.0.0.1:$PORT" $(ptperf_proto_args "$proto" "$GRPC_PORT") -q --no-server-stats \
        -p "$CALLGRIND_MS" -r 3 -s 100 --concurrency "$c" >/dev/null 2>&1 || true
      callgrind_control -i off "$SERVER_PID" >/dev/null
      after="$(answered)"
      callgrind_control -d "$SERVER_PID" >/dev/null
      for _ in $(seq 1 100); do
        f="$(ls "$RAW"/callgrind_"$label".* 2>/dev/null | head -n1)"
        [ -n "$f" ] && grep -q '^totals:' "$f" && break
        sleep 0.1
      done
      ir="$(sed -n 's/^totals: *//p' "$f")"
      echo "$label,$proto,$c,$((after - before)),$ir" >>"$RAW/callgrind_counts.csv"
      if [ "$ROUNDS" -gt 0 ] && [ "$label" = new ] && [ "$proto" = http ] && [ "$c" = 1 ]; then
        callgrind_annotate --inclusive=no "$f" 2>/dev/null | sed -n '/PROGRAM TOTALS/,$p' |
          head -n 45 | cut -c1-180 >"$OUT/top_symbols.txt" || true
        callgrind_annotate --inclusive=yes "$f" 2>/dev/null | grep -E 'pts_|evhttp_|event_base_loop' |
          head -n 40 | cut -c1-180 >"$OUT/top_inclusive.txt" || true
      fi
      if [ "$ROUNDS" -gt 0 ] && [ "$label" = baseline ] && [ "$proto" = http ] && [ "$c" = 1 ]; then
        callgrind_annotate --inclusive=yes "$f" 2>/dev/null | grep -E 'pts_|evhttp_|event_base_loop' |
          head -n 40 | cut -c1-180 >"$OUT/top_inclusive_baseline.txt" || true
      fi
      rm -f "$RAW"/callgrind_"$label".*
    done
  done
  stop_server
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/meta.txt"

if [ "$ROUNDS" -eq 0 ]; then
  # ROUNDS=0: instructions only (step 4), for an A/B of two builds without
  # the timed rounds; printed, no results files written.
  awk -F, 'NR > 1 {printf "%-8s %-6s c=%s %7.1fk instructions per request\n", $1, $2, $3, $5 / $4 / 1000}' \
    "$RAW/callgrind_counts.csv"
  exit 0
fi
"$PY" "$ROOT/bench/cpu/hotpath_report.py" "$RAW" "$OUT"
