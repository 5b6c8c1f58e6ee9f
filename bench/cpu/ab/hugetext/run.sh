#!/usr/bin/env bash
# bench/cpu/ab/hugetext/run.sh — does executable code on 2 MiB pages make a
# request cheaper? The same ptserve binary twice through bench/cpu/ab.sh:
# base as it is, new with hugetext.so preloaded (its code, LibTorch's and
# c10's moved onto huge pages before main; see hugetext.c). Writes
# results.csv, results.md and hugetext.txt (what moved, and the new
# server's AnonHugePages) to OUT_DIR, by default beside this script.
#
#   bench/cpu/ab/hugetext/run.sh [PTSERVE [OUT_DIR]]   (default build-bench/ptserve)
#       ROUNDS, CS, PROTO as for bench/cpu/ab.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
BIN="$(realpath "${1:-$ROOT/build-bench/ptserve}")"
[ -x "$BIN" ] || { echo "run.sh: no ptserve at $BIN (build-bench: see docs/benchmarks.md)" >&2; exit 1; }
# The file lists every mode and brackets the one in force: "always [madvise] never".
if grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled; then
  echo "run.sh: transparent huge pages are off here" >&2
  exit 1
fi
OUT="${2:-$HERE}"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

cc -O2 -Wall -Wextra -shared -fPIC -o "$TMP/hugetext.so" "$HERE/hugetext.c"
# The "new" server: the same binary, exec'd (so ab.sh's PID is ptserve's)
# with the library preloaded.
cat >"$TMP/ptserve-hugetext" <<WRAP
#!/bin/sh
HUGETEXT_REPORT="$TMP/report.txt" LD_PRELOAD="$TMP/hugetext.so" exec "$BIN" "\$@"
WRAP
chmod +x "$TMP/ptserve-hugetext"

ROUNDS="${ROUNDS:-8}" "$ROOT/bench/cpu/ab.sh" "$BIN" "$TMP/ptserve-hugetext" "$OUT"
sed "s|$ROOT/||" "$TMP/report.txt" >"$OUT/hugetext.txt"
cat "$OUT/hugetext.txt"
