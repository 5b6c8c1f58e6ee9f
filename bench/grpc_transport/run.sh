#!/usr/bin/env bash
# bench/grpc_transport/run.sh — what the gRPC transport itself costs the
# server per call: gRPC core's C API, as ptserve's gRPC frontend uses it,
# against nghttp2's HTTP/2 session on a libevent loop with gRPC's framing
# done by hand, on the ModelInfer call ptperf sends to the 16 -> 4 MLP and
# ptserve's reply to it, unary and streamed (ModelStreamInfer, one message
# in flight per stream), with no model and no ptserve code (transport.c says
# what each mode does).
#
#   bench/grpc_transport/run.sh        (CALLS, default 3000)
#
# Per mode, kind (unary, stream) and concurrency (1 and 4 calls or streams
# in flight on one channel, as ptperf --concurrency with one
# --grpc-channels): the server under valgrind's
# callgrind, instrumented from the arrival of call WARMUP+1 (default 300) to
# that of call WARMUP+CALLS+1, every thread of the process; instructions ÷
# CALLS. Instructions repeat from run to run, so one run per cell. Then,
# natively, ROUNDS rounds (default 5) of NATIVE_CALLS (default 20000) per
# cell, the modes alternating within each round: the server process's CPU
# time (user and kernel, all threads) over the same window ÷ calls, and the
# client's wall time per call; medians over the rounds. The client is the
# same gRPC core client (transport.c) in every cell, on the same two cores.
#
# Writes bench/grpc_transport/results/results.md (the table and each mode's
# top symbols at concurrency 1).
#
# Needs, besides ptserve's own build dependencies: valgrind and Debian's
# libnghttp2-dev (not installed by scripts/setup.sh: nothing else uses it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/grpc_transport"
OUT="$HERE/results"
WORK="${WORK_DIR:-/tmp/grpc-transport}"
CALLS="${CALLS:-3000}"
WARMUP="${WARMUP:-300}"
ROUNDS="${ROUNDS:-5}"
NATIVE_CALLS="${NATIVE_CALLS:-20000}"
PORT="${PORT:-50431}"
MODES="core core_static nghttp2"
CELLS="unary.1 unary.4 stream.1 stream.4"

for need in valgrind callgrind_annotate pkg-config cc nm; do
  command -v "$need" >/dev/null || { echo "run.sh: needs $need" >&2; exit 2; }
done
pkg-config --exists libnghttp2 || {
  echo "run.sh: needs libnghttp2-dev (apt-get install libnghttp2-dev)" >&2
  exit 2
}

mkdir -p "$WORK" "$OUT"
# abseil's SetMutexDeadlockDetectionMode under Debian's inline namespace:
# the name CMakeLists.txt derives for src/core/absl_sync.c (PTS_ABSL_SYM),
# read here from the library itself, since this program is built without
# CMake.
absl_lib="$(pkg-config --variable=libdir absl_synchronization)/libabsl_synchronization.so"
absl_sym="$(nm -D --defined-only "$absl_lib" | awk '/SetMutexDeadlockDetectionMode/ && !f {print $3; f = 1}')"
cc -O2 -g -Wall -Wextra ${absl_sym:+-DABSL_DETECTOR_SYM="\"$absl_sym\""} \
  -o "$WORK/transport" "$HERE/transport.c" \
  $(pkg-config --cflags --libs grpc libnghttp2 libevent jemalloc absl_synchronization) -ldl
# The same program with gRPC core and abseil from their static archives, as
# CMakeLists.txt links ptserve (PTS_STATIC_GRPC): libssl, libcrypto and zlib
# shared, abseil's switch exported for dlsym.
static_libs=""
for l in $(pkg-config --static --libs-only-l grpc absl_synchronization | sed 's/-l//g'); do
  case "$l" in
    ssl | crypto | z | dl | pthread | atomic | rt | m) ;;
    *) static_libs="$static_libs -l:lib$l.a" ;;
  esac
done
cc -O2 -g -Wall -Wextra ${absl_sym:+-DABSL_DETECTOR_SYM="\"$absl_sym\""} \
  -o "$WORK/transport_static" "$HERE/transport.c" $(pkg-config --cflags grpc libnghttp2 libevent) \
  -Wl,--start-group $static_libs -Wl,--end-group -lssl -lcrypto -lz -lstdc++ -lm -pthread \
  $(pkg-config --libs libnghttp2 libevent jemalloc) -ldl \
  ${absl_sym:+-Wl,--export-dynamic-symbol=$absl_sym}

SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
trap stop_server EXIT

wait_port() {
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "run.sh: the server did not open port $PORT" >&2
  exit 1
}

# One cell: MODE KIND CONCURRENCY CALLS [valgrind args...]. The server
# prints its CPU per call once the window closes; the client makes a few
# calls more so the window closes while calls still flow. Prints
# "server_us client_us".
cell() {
  local mode="$1" kind="$2" c="$3" calls="$4"
  shift 4
  local bin="$WORK/transport" serve="$mode"
  [ "$mode" = core_static ] && bin="$WORK/transport_static" serve=core
  "$@" "$bin" "$serve" "$PORT" "$WARMUP" "$calls" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  wait_port
  local client
  client="$("$WORK/transport" client "$PORT" $((WARMUP + calls + 20 * c)) "$c" \
    $([ "$kind" = stream ] && echo stream))" ||
    { echo "run.sh: $mode $kind c=$c: the client saw failed calls: $client" >&2; exit 1; }
  for _ in $(seq 1 100); do
    grep -q 'server CPU' "$WORK/server.log" && break
    sleep 0.1
  done
  stop_server
  local us wall
  echo "$client" >"$WORK/client.txt"
  us="$(sed -n 's/.*server CPU \([0-9.]*\) us.*/\1/p' "$WORK/server.log")"
  wall="$(sed -n 's/.*, \([0-9.]*\) us wall per call.*/\1/p' <<<"$client")"
  [ -n "$us" ] && [ -n "$wall" ] || { echo "run.sh: $mode $kind c=$c: no figures" >&2; exit 1; }
  echo "$us $wall"
}

# Both servers must be gRPC servers that NVIDIA's client can use: its
# unary, streaming and error paths (interop.py), with the project's venv.
PY="${PTS_PYTHON:-$ROOT/.venv/bin/python}"
if [ -x "$PY" ] && "$PY" -c 'import tritonclient.grpc' 2>/dev/null; then
  for mode in core nghttp2; do
    "$WORK/transport" "$mode" "$PORT" 1000000 1 >/dev/null 2>&1 &
    SERVER_PID=$!
    wait_port
    "$PY" "$HERE/interop.py" "$PORT" >&2 || { echo "run.sh: $mode failed the interop check" >&2; exit 1; }
    stop_server
  done
else
  echo "run.sh: no tritonclient in $PY (scripts/setup.sh makes it); interop check skipped" >&2
fi

declare -A IR
for mode in $MODES; do
  for cellname in $CELLS; do
    kind="${cellname%.*}" c="${cellname#*.}"
    key="$mode.$cellname"
    rm -f "$WORK/cg_$key".*
    cell "$mode" "$kind" "$c" "$CALLS" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$WORK/cg_$key.out" >/dev/null
    f="$(ls "$WORK/cg_$key".out.* 2>/dev/null | head -n1)"
    [ -n "$f" ] || { echo "run.sh: no callgrind dump for $key" >&2; exit 1; }
    IR[$key]="$(sed -n 's/^totals: *//p' "$f")"
    mv "$f" "$WORK/cg_$key.dump"
    echo "$key: $((IR[$key] / CALLS)) instructions per call" >&2
  done
done

# Native rounds: "mode kind.c round server_us client_us" lines.
: >"$WORK/native.txt"
for round in $(seq 1 "$ROUNDS"); do
  for cellname in $CELLS; do
    for mode in $MODES; do
      echo "$mode $cellname $round $(cell "$mode" "${cellname%.*}" "${cellname#*.}" "$NATIVE_CALLS")" \
        >>"$WORK/native.txt"
    done
  done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
declare -A US WALL
for mode in $MODES; do
  for cellname in $CELLS; do
    key="$mode.$cellname"
    US[$key]="$(awk -v m="$mode" -v c="$cellname" '$1 == m && $2 == c {print $4}' "$WORK/native.txt" | median)"
    WALL[$key]="$(awk -v m="$mode" -v c="$cellname" '$1 == m && $2 == c {print $5}' "$WORK/native.txt" | median)"
    echo "$key: ${US[$key]} us server CPU, ${WALL[$key]} us wall per call" >&2
  done
done

msg_bytes="$(sed -n 's/.*(message \([0-9]*\) bytes.*/\1/p' "$WORK/client.txt")"
reply_bytes="$(sed -n 's/.*, reply \([0-9]*\)).*/\1/p' "$WORK/client.txt")"
{
  echo "# The gRPC transport per call: gRPC core against nghttp2"
  echo
  echo "Produced by \`bench/grpc_transport/run.sh\` (CALLS=$CALLS, WARMUP=$WARMUP," \
    "ROUNDS=$ROUNDS, NATIVE_CALLS=$NATIVE_CALLS) on $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
    "tree \`$(git -C "$ROOT" rev-parse --short HEAD)\`; gRPC $(dpkg-query -W -f='${Version}' libgrpc-dev 2>/dev/null || pkg-config --modversion grpc)," \
    "nghttp2 $(pkg-config --modversion libnghttp2), libevent $(pkg-config --modversion libevent)," \
    "jemalloc as malloc in both."
  echo
  echo "The ModelInfer call ptperf sends to \`mlp\` (a $msg_bytes-byte message) and the"
  echo "reply ptserve sends ($reply_bytes bytes; 2 more in a stream's ModelStreamInferResponse),"
  echo "over one loopback HTTP/2 connection from a gRPC core client (retries off, as"
  echo "ptperf's), 1 or 4 unary calls in flight, or 1 or 4 streams with one message in"
  echo "flight each (as ptperf --streaming). Both servers"
  echo "check the message's framing and model name and send the same reply; no model"
  echo "runs. Instructions: user space, every thread of the server process, from the"
  echo "arrival of call $((WARMUP + 1)) to that of call $((WARMUP + CALLS + 1))" \
    "(callgrind), ÷ $CALLS. Server CPU: the"
  echo "process's CPU time (user and kernel, all threads) over the same window,"
  echo "natively, $NATIVE_CALLS calls per round; client wall: the client's time per call"
  echo "(at concurrency 1, its latency); medians of $ROUNDS rounds, modes alternating."
  echo
  echo "| kind | concurrency | mode | instructions per call | × core | server CPU µs per call | × core | client wall µs per call | × core |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
  for cellname in $CELLS; do
    for mode in $MODES; do
      awk -v k="${cellname%.*}" -v c="${cellname#*.}" -v m="$mode" -v n="$CALLS" \
        -v ir="${IR[$mode.$cellname]}" -v base="${IR[core.$cellname]}" \
        -v us="${US[$mode.$cellname]}" -v ubase="${US[core.$cellname]}" \
        -v w="${WALL[$mode.$cellname]}" -v wbase="${WALL[core.$cellname]}" \
        'BEGIN { printf "| %s | %d | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k, c, m, ir / n, ir / base, us, us / ubase, w, w / wbase }'
    done
  done
  echo
  echo "Per round (server CPU µs per call / client wall µs per call):"
  echo
  header="| round |" rule="|---:|"
  for cellname in $CELLS; do
    for mode in $MODES; do
      header="$header $mode $cellname |" rule="$rule---:|"
    done
  done
  echo "$header"
  echo "$rule"
  for round in $(seq 1 "$ROUNDS"); do
    row="| $round |"
    for cellname in $CELLS; do
      for mode in $MODES; do
        row="$row $(awk -v m="$mode" -v c="$cellname" -v r="$round" \
          '$1 == m && $2 == c && $3 == r {printf "%s / %s", $4, $5}' "$WORK/native.txt") |"
      done
    done
    echo "$row"
  done
  echo
  echo "- core: gRPC core's server API as src/frontend/grpc/grpc.c uses it (one"
  echo "  completion-queue thread, ModelInfer registered with its message read with"
  echo "  the call, the reply in one batch, abseil's deadlock detector off), gRPC"
  echo "  core and abseil as shared libraries."
  echo "- core_static: the same program with gRPC core, abseil, re2, upb and c-ares"
  echo "  linked from their static archives, as CMakeLists.txt links ptserve"
  echo "  (PTS_STATIC_GRPC)."
  echo "- nghttp2: one libevent loop; nghttp2's server session per connection fed from"
  echo "  \`recv\` and drained with \`nghttp2_session_mem_send\` into one \`send\`; the"
  echo "  path, content-type, grpc-timeout and grpc-encoding headers read, the 5-byte"
  echo "  message prefix checked, the reply as HEADERS, DATA and a grpc-status trailer."
  for mode in $MODES; do
    echo
    echo "## Top symbols: $mode, unary, concurrency 1 (self instructions per call)"
    echo
    echo '```'
    callgrind_annotate --inclusive=no "$WORK/cg_$mode.unary.1.dump" 2>/dev/null |
      sed -n '/file:function/,$p' | grep '\[' | head -n 15 |
      perl -pe 's/^\s*([\d,]+)/my $x=$1; $x=~s|,||g; sprintf("%7d",$x\/'"$CALLS"')/e' |
      sed -E 's|\[[^]]*/([^/]+)\]$|[\1]|' | cut -c1-120 || true
    echo '```'
  done
} >"$OUT/results.md"
echo "wrote $OUT/results.md" >&2
