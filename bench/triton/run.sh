#!/usr/bin/env bash
# bench/triton/run.sh — ptserve and tritonserver side by side on this
# machine: the same model files (one repository, read by both), the same
# clients (ptperf, and NVIDIA's perf_analyzer), the same cells, measured
# back to back on one server then the other, the order alternating between
# rounds.
#
#   bench/triton/run.sh        (ROUNDS, default 5; CS, "1 4"; PROTOS, "http grpc";
#                               BENCH_INTERVAL_MS, 1000; PA=0 skips perf_analyzer;
#                               TRITONSERVER and TRITON_BACKENDS, below; KIND,
#                               KIND_CPU or KIND_GPU: the models' instance kind;
#                               BENCH_RESULTS, the output folder)
#
# tritonserver is NVIDIA's own, r25.07, with its real PyTorch backend
# (github.com/triton-inference-server/pytorch_backend), built on this
# machine once and kept in TRITON_HOME (default build-bench/tritonserver-
# r25.07, git-ignored): when it is missing, this script builds it with
# TRITON_BUILD_SCRIPT (default ../shared/tools/build-triton.sh: Debian 12,
# CPU only, about 15 minutes on 2 cores) from the sources under MIRROR
# (bare git dirs of server, core, common, backend, third_party and
# pytorch_backend, as the tool's header says). That build's backend links
# Debian's LibTorch 1.13; TRITON_LIBTORCH=venv (the default) builds the
# backend again against the venv's LibTorch, the one ptserve links, so both
# servers run the same LibTorch and the comparison is of the servers around
# it; TRITON_LIBTORCH=debian keeps 1.13. TRITONSERVER and TRITON_BACKENDS
# name another build (NVIDIA's container: /opt/tritonserver/...) instead.
# meta.txt and the table say which LibTorch each server ran.
#
# The fixed-rate rows (FIXED_RATES, default "2000 8000" requests/s; RATE_ROUNDS,
# default 3) are perf_analyzer --request-rate-range: the server's CPU per
# request at a rate a team pays cores for, and the rate each server kept.
#
# Before measuring, check.py asks both servers for every model's answers to
# random inputs and compares them with torch's own forward().
#
# Per cell (protocol, concurrency, server): ptperf --server-pid (infer/s,
# p50, server CPU per request), then perf_analyzer (infer/s, p50; the
# server's CPU from /proc/PID/stat over its run ÷ the requests the
# statistics endpoint counted); both also give the statistics endpoint's
# queue and compute times per request. Writes bench/triton/results/{results.csv,
# results.md, plot.png} (or BENCH_RESULTS/); raw files stay in its raw/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/triton"
OUT="${BENCH_RESULTS:-$HERE/results}"
RAW="$OUT/raw"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
PY=${PYTHON:-$ROOT/.venv/bin/python}
PERF_ANALYZER="${PERF_ANALYZER:-$ROOT/.venv/bin/perf_analyzer}"
ROUNDS="${ROUNDS:-5}"
CS="${CS:-1 4}"
PROTOS="${PROTOS:-http grpc}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-1000}"
PA="${PA:-1}"
KIND="${KIND:-KIND_CPU}"
TRITON_HOME="${TRITON_HOME:-$ROOT/build-bench/tritonserver-r25.07}"
TRITON_LIBTORCH="${TRITON_LIBTORCH:-venv}"
TRITONSERVER="${TRITONSERVER:-}"
TRITON_BACKENDS="${TRITON_BACKENDS:-}"
FIXED_RATES="${FIXED_RATES:-2000 8000}"
RATE_ROUNDS="${RATE_ROUNDS:-3}"
SERVER_PID=
source "$ROOT/bench/lib.sh" # log, free_port, wait_ready, model_answered, ptperf_proto_args, cpu_ticks
declare -A PID PORT GPORT

cleanup() {
  for s in tritonserver ptserve; do
    if [ -n "${PID[$s]:-}" ]; then kill "${PID[$s]}" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# ---- build ----
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
  -DPTS_PYTHON="$(command -v "$PY")" >/dev/null
cmake --build "$BUILD" --target ptserve ptperf -j"${JOBS:-2}" >/dev/null
source "$ROOT/scripts/tritonserver.sh"
provide_tritonserver
# The venv's LibTorch first on the loader's path (libtorch.so has no version
# in its name there; Debian's are libtorch.so.1.13).
export LD_LIBRARY_PATH="$TORCH_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

rm -rf "$RAW"
mkdir -p "$RAW/models"
"$PY" "$ROOT/bench/cpu/gen_models.py" "$RAW/all" >/dev/null
for m in mlp add_sub; do
  sed -i "s/kind: KIND_CPU/kind: $KIND/" "$RAW/all/$m/config.pbtxt"
  mv "$RAW/all/$m" "$RAW/models/"
done
rm -rf "$RAW/all"

# ---- servers: both with their default flags, on the same repository ----
for s in tritonserver ptserve; do
  PORT[$s]="$(free_port)"
  GPORT[$s]="$(free_port)"
  # tritonserver's metrics are compiled out of the Debian build (no
  # prometheus-cpp), so only ptserve takes a metrics port; its counters
  # are on, as by default.
  extra=(--metrics-port "$(free_port)")
  bin="$BUILD/ptserve"
  if [ "$s" = tritonserver ]; then
    bin="$TRITONSERVER"
    extra=(--backend-directory "$TRITON_BACKENDS")
    "$bin" --help 2>&1 | grep -q -- --metrics-port && extra+=(--metrics-port "$(free_port)")
  fi
  "$bin" --model-repository "$RAW/models" --http-port "${PORT[$s]}" --grpc-port "${GPORT[$s]}" \
    "${extra[@]}" >"$RAW/server_$s.log" 2>&1 &
  PID[$s]=$!
  wait_ready "http://127.0.0.1:${PORT[$s]}/v2/models/mlp/ready" "${PID[$s]}" "$RAW/server_$s.log"
  wait_ready "http://127.0.0.1:${PORT[$s]}/v2/models/add_sub/ready" "${PID[$s]}" "$RAW/server_$s.log"
done

"$PY" "$HERE/check.py" "$RAW/models" \
  "tritonserver=127.0.0.1:${PORT[tritonserver]},127.0.0.1:${GPORT[tritonserver]}" \
  "ptserve=127.0.0.1:${PORT[ptserve]},127.0.0.1:${GPORT[ptserve]}"

{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src bench || echo +changes)"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "tritonserver=$(curl -s "http://127.0.0.1:${PORT[tritonserver]}/v2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["version"])') ($TRITONSERVER)"
  echo "triton_backend=Triton's PyTorch backend r25.07 in $TRITON_BACKENDS/pytorch"
  echo "triton_libtorch=${triton_libtorch:-as built in $TRITON_BACKENDS}"
  echo "ptserve_libtorch=the venv's LibTorch $("$PY" -c 'import torch; print(torch.__version__)')"
  echo "ptserve=$(curl -s "http://127.0.0.1:${PORT[ptserve]}/v2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["version"])')"
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__)')"
  echo "perf_analyzer=$([ -x "$PERF_ANALYZER" ] && "$PERF_ANALYZER" --version 2>&1 | head -n1 || echo missing)"
  echo "kind=$KIND"
  if [ "$KIND" = KIND_GPU ]; then
    echo "gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)"
  fi
  echo "rounds=$ROUNDS"
  echo "interval_ms=$INTERVAL_MS"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/meta.txt"

# Warm-up: TorchScript profiles a model's first runs.
for s in tritonserver ptserve; do
  for p in $PROTOS; do
    # shellcheck disable=SC2046
    "$BUILD/ptperf" -m mlp -u "127.0.0.1:${PORT[$s]}" $(ptperf_proto_args "$p" "${GPORT[$s]}") \
      -q --no-server-stats -p 500 --concurrency 4 >/dev/null 2>&1
  done
done

pa_args() { # PROTO SERVER
  case "$1" in
    http) echo "-i http -u 127.0.0.1:${PORT[$2]}" ;;
    grpc) echo "-i grpc -u 127.0.0.1:${GPORT[$2]}" ;;
  esac
}

# One perf_analyzer cell: CLIENT (perf_analyzer: --concurrency-range VALUE;
# perf_analyzer_rate: --request-rate-range VALUE) on SERVER, round R,
# PROTO; appends its row to results.csv. The server's CPU per request is
# its CPU over the run ÷ the requests its statistics endpoint counted. A
# rate the server can not keep never gives a stable measurement, and
# perf_analyzer then writes no CSV: a fixed-rate cell then takes the rate
# kept from the server's own count over the run's wall time (perf_analyzer's
# start-up included: a little low) and has no p50; a concurrency cell is
# left out, saying so.
pa_cell() { # CLIENT SERVER ROUND PROTO VALUE
  local client="$1" s="$2" r="$3" p="$4" v="$5" load=--concurrency-range
  [ "$client" = perf_analyzer_rate ] && load=--request-rate-range
  local f="$RAW/${client/perf_analyzer/pa}_${s}_${p}_${v}_r$r.csv" n0 n1 u0 k0 u1 k1 t0 t1
  rm -f "$f"
  n0="$(model_answered "${PORT[$s]}" mlp)"
  read -r u0 k0 < <(cpu_ticks "${PID[$s]}")
  t0="$(date +%s%N)"
  # shellcheck disable=SC2046
  "$PERF_ANALYZER" -m mlp $(pa_args "$p" "$s") "$load" "$v" \
    -p "$INTERVAL_MS" -s 10 -r 10 -f "$f" >>"$RAW/perf_analyzer.log" 2>&1 || true
  t1="$(date +%s%N)"
  read -r u1 k1 < <(cpu_ticks "${PID[$s]}")
  n1="$(model_answered "${PORT[$s]}" mlp)"
  if [ ! -s "$f" ] && [ "$client" = perf_analyzer ]; then
    echo "run.sh: perf_analyzer on $s, $p, c=$v failed; see $RAW/perf_analyzer.log" >&2
    return
  fi
  # perf_analyzer's CSV: its load column, Inferences/Second, ..., p50 latency (µs) by header.
  "$PY" - "$f" "$client" "$s" "$r" "$p" "$v" "$(((u1 + k1) - (u0 + k0)))" "$((n1 - n0))" \
    "$hz" "$((t1 - t0))" >>"$RAW/results.csv" <<'EOF'
import csv, os, sys
f, client, s, r, p, v, ticks, n, hz, ns = sys.argv[1:]
row = next(csv.DictReader(open(f))) if os.path.exists(f) and os.path.getsize(f) else {}
cpu = int(ticks) / int(hz) * 1e6 / int(n) if int(n) else 0.0
kept = float(row["Inferences/Second"]) if row else int(n) / (int(ns) / 1e9)
p50 = "%.1f" % float(row["p50 latency"]) if row else ""
print(f"{client},{s},{r},{p},{v},{kept:.1f},{p50},{cpu:.2f},{row.get('Server Queue', '')},"
      f"{row.get('Server Compute Input', '')},{row.get('Server Compute Infer', '')},"
      f"{row.get('Server Compute Output', '')}")
EOF
}

echo "client,server,round,protocol,concurrency,infer_per_sec,p50_us,server_cpu_us,queue_us,compute_input_us,compute_infer_us,compute_output_us" \
  >"$RAW/results.csv"
hz="$(getconf CLK_TCK)"
for r in $(seq 1 "$ROUNDS"); do
  order="tritonserver ptserve"
  [ $((r % 2)) -eq 0 ] && order="ptserve tritonserver"
  for p in $PROTOS; do
    for c in $CS; do
      for s in $order; do
        log "round $r, $p, c=$c, $s: ptperf"
        f="$RAW/ptperf_${s}_${p}_c${c}_r$r.csv"
        # shellcheck disable=SC2046
        "$BUILD/ptperf" -m mlp -u "127.0.0.1:${PORT[$s]}" $(ptperf_proto_args "$p" "${GPORT[$s]}") \
          -q -p "$INTERVAL_MS" --concurrency "$c" --server-pid "${PID[$s]}" \
          -f "$f" >>"$RAW/ptperf.log" 2>&1
        # ptperf's CSV: infer/s, p50, then the statistics endpoint's queue
        # and compute times per request, and the server's CPU per request.
        sed -n 2p "$f" | awk -F, -v s="$s" -v r="$r" -v p="$p" -v c="$c" \
          '{printf "ptperf,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
                    s, r, p, c, $5, $6, $24, $16, $17, $18, $19}' >>"$RAW/results.csv"
        [ "$PA" = 1 ] && [ -x "$PERF_ANALYZER" ] || continue
        log "round $r, $p, c=$c, $s: perf_analyzer"
        pa_cell perf_analyzer "$s" "$r" "$p" "$c"
      done
    done
  done
done

# ---- fixed rates: perf_analyzer sends FIXED_RATES requests/s (its own
# schedule, whatever the answers' pace): the rate each server kept and its
# CPU per request (pa_cell).
if [ "$PA" = 1 ] && [ -x "$PERF_ANALYZER" ]; then
  for r in $(seq 1 "$RATE_ROUNDS"); do
    order="tritonserver ptserve"
    [ $((r % 2)) -eq 0 ] && order="ptserve tritonserver"
    for p in $PROTOS; do
      for rate in $FIXED_RATES; do
        for s in $order; do
          log "fixed rate, round $r, $p, $rate/s, $s: perf_analyzer"
          pa_cell perf_analyzer_rate "$s" "$r" "$p" "$rate"
        done
      done
    done
  done
fi

{
  echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
  for s in tritonserver ptserve; do
    echo "rss_kb_$s=$(awk '/^VmRSS/ {print $2}' "/proc/${PID[$s]}/status")"
    echo "threads_$s=$(ls "/proc/${PID[$s]}/task" | wc -l)"
  done
} >>"$RAW/meta.txt"

"$PY" "$HERE/report.py" "$RAW" "$OUT"
