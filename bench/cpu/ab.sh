#!/usr/bin/env bash
# bench/cpu/ab.sh — an A/B of two ptserve binaries on one model, for
# one change's evidence: both servers run side by side, and each cell
# (concurrency) is measured on one then the other, back to back, the order
# alternating between rounds, so that the host's weather (a shared 2-core
# VM) moves both alike. bench/cpu/hotpath.sh measures all cells of one
# server, then all of the other, and counts instructions; this is its
# quicker, timing-only sibling.
#
#   bench/cpu/ab.sh BASE_PTSERVE NEW_PTSERVE OUT_DIR
#       ROUNDS (default 8), CS (concurrencies, default "1 4"),
#       PROTO (http, grpc or stream; default http), BENCH_INTERVAL_MS (1000),
#       BASE_EXTRA and NEW_EXTRA (more ptserve flags for one server: the same
#       binary twice with NEW_EXTRA="--http-thread-count 1" measures a flag),
#       MODEL (a model of bench/cpu/gen_models.py; default mlp, the 16 → 4
#       MLP; image_mean for large requests, image_half for large requests
#       and answers)
#
# Per cell: ptperf's infer/s, p50 and server CPU per request (--server-pid),
# and the server's context switches per request over ptperf's run
# (/proc/PID/status, voluntary + involuntary, every thread, ÷ the requests
# the statistics endpoint counted). Writes OUT_DIR/results.csv and
# OUT_DIR/results.md (medians, and new ÷ base per round).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE="${1:?usage: bench/cpu/ab.sh BASE_PTSERVE NEW_PTSERVE OUT_DIR}"
NEW="${2:?usage: bench/cpu/ab.sh BASE_PTSERVE NEW_PTSERVE OUT_DIR}"
OUT="${3:?usage: bench/cpu/ab.sh BASE_PTSERVE NEW_PTSERVE OUT_DIR}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
ROUNDS="${ROUNDS:-8}"
CS="${CS:-1 4}"
PROTO="${PROTO:-http}"
MODEL="${MODEL:-mlp}"
export CS PROTO MODEL
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
SERVER_PID=
source "$ROOT/bench/lib.sh" # log, free_port, wait_ready, model_answered, ptperf_proto_args
RAW="$(mktemp -d)"
declare -A PID PORT GPORT

cleanup() {
  for s in base new; do
    if [ -n "${PID[$s]:-}" ]; then kill "${PID[$s]}" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  rm -rf "$RAW"
}
trap cleanup EXIT

[ -x "$BUILD/ptperf" ] || cmake --build "$BUILD" --target ptperf -j"${JOBS:-2}" >/dev/null
mkdir -p "$OUT" "$RAW/models"
"$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
mv "$RAW/all/$MODEL" "$RAW/models/"

for s in base new; do
  bin="$BASE" extra="${BASE_EXTRA:-}"
  [ "$s" = new ] && bin="$NEW" extra="${NEW_EXTRA:-}"
  # shellcheck disable=SC2086 # the extra flags are words
  PORT[$s]="$(free_port)"
  GPORT[$s]="$(free_port)"
  "$bin" --model-repository "$RAW/models" --http-port "${PORT[$s]}" --grpc-port "${GPORT[$s]}" \
    --metrics-port "$(free_port)" $extra >"$RAW/server_$s.log" 2>&1 &
  PID[$s]=$!
  wait_ready "http://127.0.0.1:${PORT[$s]}/v2/models/$MODEL/ready" "${PID[$s]}" "$RAW/server_$s.log"
done

proto_args() { ptperf_proto_args "$PROTO" "${GPORT[$1]}"; } # SERVER
answered() { model_answered "${PORT[$1]}" "$MODEL"; } # SERVER
switches() { # PID: context switches of every thread so far
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {n += $2} END {print n + 0}'
}

for s in base new; do # warm-up: TorchScript profiles its first runs
  # shellcheck disable=SC2046
  "$BUILD/ptperf" -m "$MODEL" -u "127.0.0.1:${PORT[$s]}" $(proto_args "$s") -q --no-server-stats \
    -p 500 --concurrency 4 >/dev/null 2>&1
done

echo "server,round,protocol,concurrency,infer_per_sec,p50_us,server_cpu_us,ctx_switches_per_req" \
  >"$OUT/results.csv"
for r in $(seq 1 "$ROUNDS"); do
  for c in $CS; do
    order="base new"
    [ $((r % 2)) -eq 0 ] && order="new base"
    for s in $order; do
      log "round $r, c=$c, $s"
      b="$(answered "$s")"
      x0="$(switches "${PID[$s]}")"
      # shellcheck disable=SC2046
      "$BUILD/ptperf" -m "$MODEL" -u "127.0.0.1:${PORT[$s]}" $(proto_args "$s") -q --no-server-stats \
        -p "$INTERVAL_MS" --concurrency "$c" --server-pid "${PID[$s]}" -f "$RAW/p.csv" \
        >>"$RAW/ptperf.log" 2>&1
      x1="$(switches "${PID[$s]}")"
      a="$(answered "$s")"
      sed -n 2p "$RAW/p.csv" | awk -F, -v s="$s" -v r="$r" -v p="$PROTO" -v c="$c" \
        -v x="$((x1 - x0))" -v n="$((a - b))" \
        '{printf "%s,%s,%s,%s,%s,%s,%s,%.3f\n", s, r, p, c, $5, $6, $24, (n ? x / n : 0)}' \
        >>"$OUT/results.csv"
    done
  done
done

"$PY" - "$OUT" "$BASE" "$NEW" "$ROUNDS" <<'EOF'
import csv, os, statistics, subprocess, sys, datetime
out, base, new, rounds = sys.argv[1:5]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
cells = sorted({(r["protocol"], int(r["concurrency"])) for r in rows})
def med(s, p, c, k):
    return statistics.median(float(r[k]) for r in rows
                             if r["server"] == s and r["protocol"] == p and int(r["concurrency"]) == c)
load = open("/proc/loadavg").read().split()[:3]
model = os.environ.get("MODEL", "mlp")
model = "the 16 → 4 MLP" if model == "mlp" else f"`{model}` of bench/cpu/gen_models.py"
def extra(side):
    flags = os.environ.get(side + "_EXTRA", "")
    return " " + flags if flags else ""
L = ["# A/B: two ptserve builds, cell by cell\n",
     f"Produced by `bench/cpu/ab.sh` (ROUNDS={rounds}, CS=\"{os.environ.get('CS', '1 4')}\", "
     f"PROTO={os.environ.get('PROTO', 'http')}) on "
     f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}; base `{base}{extra('BASE')}`, "
     f"new `{new}{extra('NEW')}`; "
     f"load average after {' '.join(load)}. Model {model}, ptperf on the same 2-core VM; each cell "
     "measured on one server then the other, back to back, the order alternating; medians over the "
     "rounds.\n",
     "| protocol | c | infer/s base | new | × | p50 µs base | new | server CPU µs/req base | new | × | ctx switches/req base | new |",
     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for p, c in cells:
    v = {(s, k): med(s, p, c, k) for s in ("base", "new")
         for k in ("infer_per_sec", "p50_us", "server_cpu_us", "ctx_switches_per_req")}
    L.append(f"| {p} | {c} | {v['base', 'infer_per_sec']:,.0f} | {v['new', 'infer_per_sec']:,.0f} | "
             f"{v['new', 'infer_per_sec'] / v['base', 'infer_per_sec']:.2f} | {v['base', 'p50_us']:.0f} | "
             f"{v['new', 'p50_us']:.0f} | {v['base', 'server_cpu_us']:.1f} | {v['new', 'server_cpu_us']:.1f} | "
             f"{v['new', 'server_cpu_us'] / v['base', 'server_cpu_us']:.2f} | "
             f"{v['base', 'ctx_switches_per_req']:.2f} | {v['new', 'ctx_switches_per_req']:.2f} |")
L += ["", "Server CPU per request, new ÷ base, round by round (a cell's two measurements were "
      "back to back):", "", "| protocol | c | " + " | ".join(f"r{i}" for i in range(1, int(rounds) + 1)) + " |",
      "|---|---:|" + "---:|" * int(rounds)]
for p, c in cells:
    per = {(r["server"], int(r["round"])): float(r["server_cpu_us"]) for r in rows
           if r["protocol"] == p and int(r["concurrency"]) == c}
    L.append(f"| {p} | {c} | " + " | ".join(f"{per['new', i] / per['base', i]:.2f}"
                                             for i in range(1, int(rounds) + 1)) + " |")
open(os.path.join(out, "results.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
