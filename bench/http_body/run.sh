#!/usr/bin/env bash
# bench/http_body/run.sh — what reading a ~300 KB HTTP request body costs the
# server, before and after the frontend's large body reads (admit.c,
# body_read; docs/internals/http.md, "Large bodies"), in the same run.
#
#   bench/http_body/run.sh    (BASE_REF: default the merge base of main and HEAD)
#
# 1. builds ptserve at BASE_REF (git archive → $BASE_DIR, default
#    /tmp/bigread-base; the commit is noted in $BASE_DIR/ref) and this tree
#    (→ build-bench-http/), both Release
#    without LibTorch (the identity backend needs none), plus ptperf from
#    this tree, which loads both servers;
# 2. ROUNDS times (default 3), for each build in turn (base, new), serves
#    tests/e2e/repos/identity and
#    - counts the server's system calls (strace -f -c) while one client
#      sends 10 inferences of dt_uint8 with a 301,056-byte input (a ResNet-50
#      FP16 image's size) on one keep-alive connection;
#    - runs ptperf on the same request at concurrency 1 and 2 with
#      --server-pid: server CPU per request (/proc/PID/stat), throughput,
#      latency;
# 3. writes bench/http_body/results/{results.md,*.csv,strace-*.txt}.
# Alternating the builds over rounds spreads what the other users of a shared
# machine do over both.
#
# Client and servers share this machine's cores: compare the two builds
# within one run, not absolute numbers across machines or runs. The identity
# backend echoes its input, so every reply also carries 301,056 bytes.
#
# Environment: ROUNDS, BASE_REF, BASE_DIR, BENCH_BUILD_DIR, BENCH_INTERVAL_MS
# (ptperf window, default 2000), JOBS, PYTHON (default: the project venv's,
# else python3), SKIP_BUILD=1 (measure the builds already there).
# Needs strace, curl and pkg-config besides the build's own dependencies.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_REF="${BASE_REF:-$(git -C "$ROOT" merge-base main HEAD)}"
BASE_DIR="${BASE_DIR:-/tmp/bigread-base}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-http}"
RESULTS="$ROOT/bench/http_body/results"
INTERVAL_MS="${BENCH_INTERVAL_MS:-2000}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
REPO="$ROOT/tests/e2e/repos/identity"
N=301056
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DPTS_WITH_TORCH=OFF -DPTS_BUILD_TESTS=OFF)
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct

trap stop_server EXIT

start_server() { # $1 = ptserve binary; sets SERVER_PID and PORT
  PORT="$(free_port)"
  "$1" --model-repository "$REPO" --http-port "$PORT" --http-address 127.0.0.1 \
    --grpc-port 0 --metrics-port 0 > "$RESULTS/server-$2.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" > /dev/null && return 0
    sleep 0.1
  done
  log "server $1 did not become ready"; exit 1
}

# 10 inferences with an N-byte binary input on one keep-alive connection.
send_ten() {
  "$PY" - "$PORT" "$N" <<'EOF'
import json, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [1, n],
                                 "parameters": {"binary_data_size": n}}],
                     "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
body = header + bytes(i % 251 for i in range(n))
req = (b"POST /v2/models/dt_uint8/infer HTTP/1.1\r\nHost: b\r\n"
       b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
       % (len(header), len(body))) + body
with socket.create_connection(("127.0.0.1", port)) as s:
    f = s.makefile("rb")
    for _ in range(10):
        s.sendall(req)
        assert f.readline().startswith(b"HTTP/1.1 200"), "not 200"
        length = 0
        while True:
            line = f.readline()
            if line == b"\r\n":
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        assert len(f.read(length)) == length
EOF
}

build_base() {
  log "building $BASE_REF in $BASE_DIR"
  rm -rf "$BASE_DIR/src"
  mkdir -p "$BASE_DIR/src"
  git -C "$ROOT" archive "$BASE_REF" | tar -x -C "$BASE_DIR/src"
  git -C "$ROOT" rev-parse --short "$BASE_REF" > "$BASE_DIR/ref"
  cmake -S "$BASE_DIR/src" -B "$BASE_DIR/build" "${CMAKE_ARGS[@]}" > /dev/null
  cmake --build "$BASE_DIR/build" -j "${JOBS:-2}" --target ptserve > /dev/null
}

mkdir -p "$RESULTS"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  build_base
  log "building this tree in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" "${CMAKE_ARGS[@]}" > /dev/null
  cmake --build "$BUILD" -j "${JOBS:-2}" --target ptserve ptperf > /dev/null
fi

ROUNDS="${ROUNDS:-3}"
busy_before="$(cpu_busy_pct)"
declare -A STRACE
for round in $(seq "$ROUNDS"); do
for which in base new; do
  run="$which-$round"
  if [ "$which" = base ]; then bin="$BASE_DIR/build/ptserve"; else bin="$BUILD/ptserve"; fi
  start_server "$bin" "$run"
  log "$run: strace -f -c over 10 requests"
  strace -f -c -o "$RESULTS/strace-$run.txt" -p "$SERVER_PID" 2> /dev/null &
  spid=$!
  sleep 1 # strace attaches to every thread
  send_ten
  sleep 0.5
  kill -INT "$spid"
  wait "$spid" || true
  STRACE[$run]="$(awk '$NF ~ /^(readv|epoll_wait|ioctl)$/ { printf "%s=%s ", $NF, $4 }' \
    "$RESULTS/strace-$run.txt")"
  log "$run: ptperf"
  "$BUILD/ptperf" -m dt_uint8 -u "127.0.0.1:$PORT" --shape "INPUT0:$N" --concurrency 1,2 \
    -p "$INTERVAL_MS" --server-pid "$SERVER_PID" -f "$RESULTS/ptperf-$run.csv" \
    | tee "$RESULTS/ptperf-$run.txt"
  stop_server
done
done
busy_after="$(cpu_busy_pct)"

# results.md: one row per build and concurrency.
{
  echo "# HTTP request bodies of 301,056 bytes: before and after large body reads"
  echo
  echo "Command: \`bench/http_body/run.sh\` (ptperf -p $INTERVAL_MS)."
  echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) cores,"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
  echo "libevent $(pkg-config --modversion libevent 2> /dev/null || echo '?')."
  echo "Load: ${busy_before}% of all cores busy just before, ${busy_after}% just after"
  echo "(shared machine: other builds and tests ran); ptperf's other% below is the"
  echo "share of all cores used by neither ptperf nor the server during each row."
  echo
  echo "base = $(cat "$BASE_DIR/ref" 2> /dev/null || echo '?'), new = this tree"
  echo "($(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src || echo ', with uncommitted changes'))."
  echo
  echo "## System calls of the server, 10 requests (strace -f -c)"
  echo
  echo "| build | round | readv | ioctl | epoll_wait |"
  echo "|---|---:|---:|---:|---:|"
  for which in base new; do
    for round in $(seq "$ROUNDS"); do
      line="${STRACE[$which-$round]}"
      get() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<< "$line"; }
      echo "| $which | $round | $(get readv) | $(get ioctl) | $(get epoll_wait) |"
    done
  done
  echo
  echo "## ptperf, dt_uint8 [1, $N], binary in and out"
  echo
  echo "| build | round | concurrency | infer/s | p50 µs | srv cpu µs/req | cli cpu µs/req | other% |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for which in base new; do
    for round in $(seq "$ROUNDS"); do
      awk -F, -v w="$which" -v r="$round" 'NR > 1 {
        printf "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.1f |\n", w, r, $4, $5, $6, $24, $23, $25
      }' "$RESULTS/ptperf-$which-$round.csv"
    done
  done
} > "$RESULTS/results.md"
cat "$RESULTS/results.md"
