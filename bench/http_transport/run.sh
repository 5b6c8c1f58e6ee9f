#!/usr/bin/env bash
# bench/http_transport/run.sh — what the HTTP/1.1 layer itself costs per
# request: libevent's evhttp, as ptserve's frontend uses it, against a
# bufferevent with a parser library and the reply head written by hand
# (node's http-parser; picohttpparser, inside Debian's libh2o-evloop), on the
# request ptperf sends to the 16 -> 4 MLP and ptserve's reply to it, with no
# model and no ptserve code (transport.c says what each mode does).
#
#   bench/http_transport/run.sh        (REQUESTS, default 5000)
#
# Each mode serves REQUESTS keep-alive requests, after 200 of warm-up, on one
# loopback connection, under valgrind's callgrind collecting only the server's
# turns of the loop; instructions ÷ REQUESTS. Instructions repeat from run to
# run, so one run per mode. Then, natively, ROUNDS rounds (default 5) of
# NATIVE_REQUESTS (default 20000) per mode, the modes alternating within each
# round: the server's CPU time per request (user and kernel, its loop turns
# only), the median over the rounds. All three modes in the same run.
#
# Writes bench/http_transport/results/results.md (the table and each mode's
# top symbols).
#
# Needs, besides ptserve's own build dependencies: valgrind, and the Debian
# packages libhttp-parser-dev and libh2o-evloop-dev (not installed by
# scripts/setup.sh: nothing but this benchmark uses them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/http_transport"
OUT="$HERE/results"
WORK="${WORK_DIR:-/tmp/http-transport}"
REQUESTS="${REQUESTS:-5000}"
ROUNDS="${ROUNDS:-5}"
NATIVE_REQUESTS="${NATIVE_REQUESTS:-20000}"

for need in valgrind callgrind_annotate pkg-config cc; do
  command -v "$need" >/dev/null || { echo "run.sh: needs $need" >&2; exit 2; }
done
for hdr in /usr/include/http_parser.h /usr/include/h2o.h; do
  [ -e "$hdr" ] || {
    echo "run.sh: needs libhttp-parser-dev and libh2o-evloop-dev (apt-get install)" >&2
    exit 2
  }
done

mkdir -p "$WORK" "$OUT"
cc -O2 -Wall -Wextra -o "$WORK/transport" "$HERE/transport.c" \
  $(pkg-config --cflags --libs libevent) -lhttp_parser -lh2o-evloop

declare -A IR
for mode in evhttp http_parser pico; do
  rm -f "$WORK/cg_$mode.out"
  valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$WORK/cg_$mode.out" \
    "$WORK/transport" "$mode" "$REQUESTS" >"$WORK/$mode.log" 2>&1 ||
    { cat "$WORK/$mode.log" >&2; exit 1; }
  IR[$mode]="$(sed -n 's/^totals: *//p' "$WORK/cg_$mode.out")"
  echo "$mode: $((IR[$mode] / REQUESTS)) instructions per request" >&2
done

# Native rounds: "mode round us" lines.
: >"$WORK/native.txt"
for round in $(seq 1 "$ROUNDS"); do
  for mode in evhttp http_parser pico; do
    us="$("$WORK/transport" "$mode" "$NATIVE_REQUESTS" | sed -n 's/.*server CPU \([0-9.]*\) us.*/\1/p')"
    [ -n "$us" ] || { echo "run.sh: $mode did not report its CPU time" >&2; exit 1; }
    echo "$mode $round $us" >>"$WORK/native.txt"
  done
done
declare -A US
for mode in evhttp http_parser pico; do
  US[$mode]="$(awk -v m="$mode" '$1 == m {print $3}' "$WORK/native.txt" | sort -n |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"
  echo "$mode: ${US[$mode]} us of server CPU per request (median of $ROUNDS)" >&2
done

{
  echo "# The HTTP/1.1 layer per request: evhttp against a parser library"
  echo
  echo "Produced by \`bench/http_transport/run.sh\` (REQUESTS=$REQUESTS) on" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ), tree \`$(git -C "$ROOT" rev-parse --short HEAD)\`;" \
    "libevent $(pkg-config --modversion libevent)," \
    "http-parser $(dpkg-query -W -f='${Version}' libhttp-parser-dev 2>/dev/null || echo '?')," \
    "libh2o-evloop $(dpkg-query -W -f='${Version}' libh2o-evloop-dev 2>/dev/null || echo '?')."
  echo
  echo "One loopback keep-alive connection, one libevent loop; the request ptperf sends to"
  echo "\`mlp\` (4 headers, a 204-byte body) and the reply ptserve sends (4 headers, a"
  echo "156-byte body). Every mode finds the same four request headers, copies the body"
  echo "once and sends the same reply; no model runs. Instructions: user space, the"
  echo "server's loop turns only (callgrind, $REQUESTS requests), ÷ requests. Server CPU:"
  echo "the thread's CPU time (user and kernel; the kernel's loopback delivery of each"
  echo "reply included) over the same turns, natively, $NATIVE_REQUESTS requests per"
  echo "round, median of $ROUNDS rounds with the modes alternating."
  echo
  echo "| mode | instructions per request | × evhttp | server CPU µs per request | × evhttp |"
  echo "|---|---:|---:|---:|---:|"
  for mode in evhttp http_parser pico; do
    awk -v m="$mode" -v ir="${IR[$mode]}" -v base="${IR[evhttp]}" -v n="$REQUESTS" \
      -v us="${US[$mode]}" -v ubase="${US[evhttp]}" \
      'BEGIN { printf "| %s | %d | %.2f | %.2f | %.2f |\n", m, ir / n, ir / base, us, us / ubase }'
  done
  echo
  echo "Server CPU per round (µs per request):"
  echo
  echo "| round | evhttp | http_parser | pico |"
  echo "|---:|---:|---:|---:|"
  for round in $(seq 1 "$ROUNDS"); do
    awk -v r="$round" '$2 == r {v[$1] = $3} END {printf "| %d | %s | %s | %s |\n", r, v["evhttp"], v["http_parser"], v["pico"]}' "$WORK/native.txt"
  done
  echo
  echo "- evhttp: libevent's HTTP server as ptserve's frontend uses it (its reply"
  echo "  headers in two entries, src/frontend/http/http.c)."
  echo "- http_parser: a bufferevent; node's http-parser (libhttp-parser) reads the head;"
  echo "  the reply head pieced together with memcpy (as ptserve pieces its headers)."
  echo "- pico: the same with picohttpparser's \`phr_parse_request\` (exported by"
  echo "  libh2o-evloop, whose packages install no header for it)."
  for mode in evhttp http_parser pico; do
    echo
    echo "## Top symbols: $mode (self instructions per request)"
    echo
    echo '```'
    callgrind_annotate --inclusive=no "$WORK/cg_$mode.out" 2>/dev/null |
      sed -n '/file:function/,$p' | grep '\[' | head -n 12 |
      perl -pe 's/^\s*([\d,]+)/my $x=$1; $x=~s|,||g; sprintf("%7d",$x\/'"$REQUESTS"')/e' |
      sed -E 's|\[[^]]*/([^/]+)\]$|[\1]|' | cut -c1-120
    echo '```'
  done
} >"$OUT/results.md"
echo "wrote $OUT/results.md" >&2
