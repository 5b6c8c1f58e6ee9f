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
# tritonserver is the one in PyPI's nvidia-pytriton wheel (pinned below:
# Triton 2.51.0, the r24.10 release), which this script downloads once into
# build-bench/triton/. That build has only Triton's Python backend, so
# tritonserver runs the models through bench/triton/backend.c, a Triton
# backend made of ptserve's own LibTorch bridge, installed as
# backends/pytorch/libtriton_pytorch.so: the forward() both servers run is
# the same code, and the comparison is of the servers around it. That
# backend does less per request than Triton's PyTorch backend, so its
# tritonserver figures are a lower bound on the real one's cost. Where a
# full tritonserver is at hand (NVIDIA's container), TRITONSERVER=its binary
# and TRITON_BACKENDS=its backend directory (/opt/tritonserver/backends) run
# it with Triton's own PyTorch backend instead of both.
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
PYTRITON="nvidia-pytriton==0.7.0" # tritonserver 2.51.0 (r24.10)
TRITON_HOME="$BUILD/triton"
TRITONSERVER="${TRITONSERVER:-}"
TRITON_BACKENDS="${TRITON_BACKENDS:-}"
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

# ---- build and fetch ----
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
  -DPTS_PYTHON="$(command -v "$PY")" >/dev/null
cmake --build "$BUILD" --target ptserve ptperf bench_triton_backend -j"${JOBS:-2}" >/dev/null
if [ -z "$TRITONSERVER" ] && [ ! -x "$TRITON_HOME/bin/tritonserver" ]; then
  log "fetching tritonserver ($PYTRITON, from PyPI)"
  rm -rf "$TRITON_HOME" && mkdir -p "$TRITON_HOME/wheel"
  "$PY" -m pip download -q --no-deps "$PYTRITON" -d "$TRITON_HOME/wheel"
  # Only the server and the libraries it links: its RPATH finds them at
  # ../../../nvidia_pytriton.libs from pytriton/tritonserver/bin.
  "$PY" - "$TRITON_HOME" <<'EOF'
import glob, os, sys, zipfile
home = sys.argv[1]
whl = zipfile.ZipFile(glob.glob(os.path.join(home, "wheel", "*.whl"))[0])
for name in whl.namelist():
    if name.startswith("nvidia_pytriton.libs/") or name == "pytriton/tritonserver/bin/tritonserver":
        whl.extract(name, os.path.join(home, "pkg"))
os.chmod(os.path.join(home, "pkg/pytriton/tritonserver/bin/tritonserver"), 0o755)
os.makedirs(os.path.join(home, "bin"), exist_ok=True)
os.symlink("../pkg/pytriton/tritonserver/bin/tritonserver", os.path.join(home, "bin/tritonserver"))
EOF
fi
fetched=
if [ -z "$TRITONSERVER" ]; then
  TRITONSERVER="$TRITON_HOME/bin/tritonserver"
  fetched=" ($PYTRITON)"
fi
backend="$TRITON_BACKENDS/pytorch"
if [ -z "$TRITON_BACKENDS" ]; then
  TRITON_BACKENDS="$TRITON_HOME/backends"
  mkdir -p "$TRITON_BACKENDS/pytorch"
  cp "$BUILD/libtriton_pytorch.so" "$TRITON_BACKENDS/pytorch/"
  backend="stand-in"
fi

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
  extra=()
  bin="$BUILD/ptserve"
  if [ "$s" = tritonserver ]; then
    bin="$TRITONSERVER"
    extra=(--backend-directory "$TRITON_BACKENDS")
  fi
  "$bin" --model-repository "$RAW/models" --http-port "${PORT[$s]}" --grpc-port "${GPORT[$s]}" \
    --metrics-port "$(free_port)" "${extra[@]}" >"$RAW/server_$s.log" 2>&1 &
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
  echo "tritonserver=$(curl -s "http://127.0.0.1:${PORT[tritonserver]}/v2" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["version"])')$fetched"
  echo "triton_backend=$backend"
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
        f="$RAW/pa_${s}_${p}_c${c}_r$r.csv"
        n0="$(model_answered "${PORT[$s]}" mlp)"
        read -r u0 k0 < <(cpu_ticks "${PID[$s]}")
        # shellcheck disable=SC2046
        if ! "$PERF_ANALYZER" -m mlp $(pa_args "$p" "$s") --concurrency-range "$c" \
            -p "$INTERVAL_MS" -s 10 -r 10 -f "$f" >>"$RAW/perf_analyzer.log" 2>&1; then
          echo "run.sh: perf_analyzer on $s, $p, c=$c failed; see $RAW/perf_analyzer.log" >&2
          continue
        fi
        read -r u1 k1 < <(cpu_ticks "${PID[$s]}")
        n1="$(model_answered "${PORT[$s]}" mlp)"
        # perf_analyzer's CSV: Concurrency, Inferences/Second, ..., p50 latency (µs) by header.
        "$PY" - "$f" "$s" "$r" "$p" "$c" "$(((u1 + k1) - (u0 + k0)))" "$((n1 - n0))" "$hz" \
          >>"$RAW/results.csv" <<'EOF'
import csv, sys
f, s, r, p, c, ticks, n, hz = sys.argv[1:]
row = next(csv.DictReader(open(f)))
cpu = int(ticks) / int(hz) * 1e6 / int(n) if int(n) else 0.0
print(f"perf_analyzer,{s},{r},{p},{c},{float(row['Inferences/Second']):.1f},"
      f"{float(row['p50 latency']):.1f},{cpu:.2f},{row['Server Queue']},"
      f"{row['Server Compute Input']},{row['Server Compute Infer']},{row['Server Compute Output']}")
EOF
      done
    done
  done
done

{
  echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
  for s in tritonserver ptserve; do
    echo "rss_kb_$s=$(awk '/^VmRSS/ {print $2}' "/proc/${PID[$s]}/status")"
    echo "threads_$s=$(ls "/proc/${PID[$s]}/task" | wc -l)"
  done
} >>"$RAW/meta.txt"

"$PY" "$HERE/report.py" "$RAW" "$OUT"
