#!/usr/bin/env bash
# bench/cpu/floor/run.sh — ptserve's CPU per request against the floor of
# this machine: the same client (ptperf), the same model's requests, the
# same answers, served by floor.c (one epoll loop that writes back bytes
# ptserve recorded; no parser library, no model). What the floor spends is
# what any server on this VM pays per request (loopback TCP, the sleep in
# epoll_wait, the wake-ups); ptserve's figure minus it is what ptserve's
# own code and LibTorch add (issue #13).
#
#   bench/cpu/floor/run.sh     (ROUNDS, default 5; BENCH_INTERVAL_MS, 1000;
#                               PERF_SECONDS, 3; PLACE_ROUNDS, 3)
#
# Per round and concurrency (1 and 4), the two servers back to back, the
# order alternating between rounds:
#   1. ptperf --server-pid: infer/s, p50, server CPU per request (the
#      server's /proc CPU time over ptperf's windows ÷ requests);
#   2. a further window of PERF_SECONDS under the same load: the server's
#      user and kernel ticks from /proc/PID/stat ÷ the exact number of
#      requests it answered meanwhile (ptserve: its statistics endpoint;
#      floor: GET /floor/count).
# Then PLACE_ROUNDS rounds at c=1 with the server's threads pinned to one CPU
# and ptperf on the same CPU, on another, or unpinned (below). Then, once per
# concurrency, `perf record -e cpu-clock` on ptserve (a timer
# sample, as this VM has no hardware counters): its time by shared object,
# which report.py turns into µs per request.
#
# Writes bench/cpu/floor/results/{results.csv,results.md,plot.png}; raw files
# stay in bench/cpu/floor/results/raw (not committed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/bench/cpu/floor"
OUT="$HERE/results"
RAW="$OUT/raw"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
ROUNDS="${ROUNDS:-5}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
PERF_SECONDS="${PERF_SECONDS:-3}"
PLACE_ROUNDS="${PLACE_ROUNDS:-3}"
source "$ROOT/bench/lib.sh"        # log, stop_server, free_port, wait_ready, model_answered, cpu_ticks
source "$HERE/servers.sh"          # start_floor_servers, stop_floor_servers, pid_of, port_of, answered
trap stop_floor_servers EXIT

rm -rf "$RAW"
mkdir -p "$RAW"
start_floor_servers

echo "server,round,concurrency,requests,user_ticks,sys_ticks" >"$RAW/ticks.csv"
measure() { # SERVER ROUND C
  local s="$1" r="$2" c="$3" pid port
  pid="$(pid_of "$s")"
  port="$(port_of "$s")"
  "$BUILD/ptperf" -m mlp -u "127.0.0.1:$port" -q --no-server-stats -p "$INTERVAL_MS" \
    --concurrency "$c" --server-pid "$pid" -f "$RAW/ptperf_${s}_r${r}_c${c}.csv" >>"$RAW/ptperf.log" 2>&1
  "$BUILD/ptperf" -m mlp -u "127.0.0.1:$port" -q --no-server-stats \
    -p $(((PERF_SECONDS * 1000 + 1500) / 3)) -r 3 -s 100 --concurrency "$c" >/dev/null 2>&1 &
  local load=$! before after t0 t1
  sleep 0.7
  before="$(answered "$s")"
  t0="$(cpu_ticks "$pid")"
  sleep "$PERF_SECONDS"
  t1="$(cpu_ticks "$pid")"
  after="$(answered "$s")"
  wait "$load" || true
  set -- $t0 $t1
  echo "$s,$r,$c,$((after - before)),$(($3 - $1)),$(($4 - $2))" >>"$RAW/ticks.csv"
}

for r in $(seq 1 "$ROUNDS"); do
  for c in 1 4; do
    if [ $((r % 2)) -eq 1 ]; then order="ptserve floor"; else order="floor ptserve"; fi
    for s in $order; do
      log "round $r c=$c $s"
      measure "$s" "$r" "$c"
    done
  done
done

# Placement, at c=1: every thread of the server pinned to CPU 0 and ptperf
# on the same CPU (same), on another (apart), or left to the scheduler
# (server: only the server pinned), alternating. Whether a reply must
# wake a client sleeping on another virtual CPU (and a request a server
# sleeping on another) is most of what a request costs at c=1 on this VM;
# the third says whether a server can bring that about by pinning itself.
ALL_CPUS="0-$(($(nproc) - 1))"
if [ "$(nproc)" -ge 2 ]; then
  for r in $(seq 1 "$PLACE_ROUNDS"); do
    for place in same apart server; do
      for s in ptserve floor; do
        log "placement round $r $place $s"
        pid="$(pid_of "$s")"
        taskset -a -p -c 0 "$pid" >/dev/null
        client=(taskset -c 0)
        [ "$place" = apart ] && client=(taskset -c 1)
        [ "$place" = server ] && client=()
        "${client[@]}" "$BUILD/ptperf" -m mlp -u "127.0.0.1:$(port_of "$s")" -q --no-server-stats \
          -p "$INTERVAL_MS" --concurrency 1 --server-pid "$pid" \
          -f "$RAW/place_${s}_${place}_r${r}.csv" >>"$RAW/ptperf.log" 2>&1
        taskset -a -p -c "$ALL_CPUS" "$pid" >/dev/null
      done
    done
  done
fi

# Where ptserve's time goes: timer samples by shared object.
if command -v perf >/dev/null; then
  for c in 1 4; do
    log "perf record: ptserve c=$c"
    "$BUILD/ptperf" -m mlp -u "127.0.0.1:$PORT" -q --no-server-stats \
      -p $(((PERF_SECONDS * 1000 + 1500) / 3)) -r 3 -s 100 --concurrency "$c" >/dev/null 2>&1 &
    load=$!
    sleep 0.7
    perf record -F 4999 -e cpu-clock -p "$SERVER_PID" -o "$RAW/perf_c$c.data" -- sleep "$PERF_SECONDS" \
      >/dev/null 2>&1 || true
    wait "$load" || true
    perf report -i "$RAW/perf_c$c.data" --sort dso --stdio 2>/dev/null | grep -v '^#' |
      sed '/^$/d' >"$RAW/dso_c$c.txt" || true
  done
fi
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "tree=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src || echo +)"
  echo "cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)"
  echo "cores=$(nproc)"
  echo "clk_tck=$(getconf CLK_TCK)"
  echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rounds=$ROUNDS"
  echo "place_rounds=$PLACE_ROUNDS"
} >"$RAW/meta.txt"
"$PY" "$HERE/report.py" "$RAW" "$OUT"
