#!/usr/bin/env bash
# bench/gpu/run.sh — ptserve on an NVIDIA GPU against PyTorch in process,
# all in one run on the GPU host (issue: GPU execution, part 9).
#
#   bench/gpu/run.sh [RAW_DIR]        (default bench/gpu/raw)
#
# 1. builds ptserve, ptperf and bench_inproc (Release) against the host's
#    pip torch (C dependencies from the offline bundle when present);
# 2. writes ResNet-50 (FP32, FP16: CUDA graphs at 13 batch sizes, batches
#    padded up to them; FP16 with a CUDA graph at batch 1 only) and a small
#    MLP (bench/gpu/gen_models.py);
# 3. (a) the reference: PyTorch itself (bench/gpu/torch_ref.py) running the
#        same model files at batch 1..256, with the batch on the device and
#        with a pinned host batch copied in and out each call, eager and
#        (ResNet-50) as CUDA graphs at each batch, and the FP16 ResNet-50
#        and the MLP as CUDA graphs at batch 1;
#    (a') a diagnostic, not a reference: the same files through ptserve's
#        own bridge in process (bench_inproc) at batch 1, 8, 32, 128 and as
#        CUDA graphs at batch 1;
#    (b) ptserve over HTTP, binary tensors, dynamic batching, one image per
#        request, concurrency 1..512 (ptperf); the ResNet-50s again with
#        inputs and outputs in system shared memory (ptperf --shared-memory
#        system, the server with --allow-client-shm=true), then in CUDA
#        shared memory (ptperf --shared-memory cuda, with the CUDA runtime
#        of the pip torch; skipped, with a line saying why, when ptperf's
#        CUDA mode does not work here), and over gRPC (ptperf -i grpc,
#        ModelInfer calls on 4 channels);
#    (b') the device's busy share (nvidia-smi) during each ResNet-50 load
#        at concurrency 512;
#    (c) ptserve with the CUDA-graph model at concurrency 1 (binary tensors,
#        system and CUDA shared memory);
#    (d) first-request latency of a fresh server with and without warmup;
# 4. bench/gpu/report.py turns RAW_DIR into results.md, results.csv, plot.png.
#
# BENCH_SKIP_BRIDGE=1 leaves out (a'), BENCH_SKIP_FIRST=1 leaves out (d): a
# run that must fit a short device call (the report then has no bridge
# column and no first-request table).
#
# BENCH_SET=aoti runs the AOTInductor set instead (issue 46, part 5): the
# FP16 ResNet-50 exported as model.pt2 (gen_models.py --aoti), PyTorch's
# aoti_load_package of the same package as the reference (eager and as
# CUDA graphs), and ptserve's torch_aoti platform (padded CUDA graphs, as the
# TorchScript ResNet-50s) under the same loads as
# above (HTTP, system and CUDA shared memory, gRPC, device busy); the
# report goes to bench/gpu/results-aoti.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAW="${1:-$ROOT/bench/gpu/raw}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-gpu}"
MODELS="${BENCH_MODELS:-/tmp/pts-bench-gpu-models}"
INTERVAL_MS="${BENCH_INTERVAL_MS:-2000}"
PY="${PYTHON:-python3}"
SERVER_PID=
source "$ROOT/bench/lib.sh"  # log, stop_server, free_port, cpu_busy_pct
source "$ROOT/bench/gpu/lib.sh"  # gpu_meta, gpu_build, find_cudart, start_server, ptperf
trap stop_server EXIT
[ -d "$ROOT/.bundle/debs" ] && source "$ROOT/scripts/use-bundle.sh"
mkdir -p "$RAW"
gpu_build

SET="${BENCH_SET:-torchscript}"
if [ "${BENCH_KEEP_MODELS:-0}" = 1 ] && [ -d "$MODELS" ]; then
  # (a second call of a short device lease: the package took minutes)
  log "models ($SET) in $MODELS as they are (BENCH_KEEP_MODELS=1)"
else
  log "models ($SET) in $MODELS"
  rm -rf "$MODELS"
  "$PY" "$ROOT/bench/gpu/gen_models.py" "$MODELS" $([ "$SET" = aoti ] && echo --aoti)
fi
gpu_meta
echo "set=$SET" >>"$RAW/meta.txt"

CUDART="$(find_cudart)"
echo "cudart=${CUDART:-none}" >>"$RAW/meta.txt"

# CUDA shared memory only where ptperf's CUDA mode works: a short run on
# model $1 first (the runtime loads, the GPU is there, the server opens the
# IPC handles). Sets CUDA_SHM=1 and exports PTPERF_CUDART where it does.
CUDA_SHM=
probe_cuda_shm() {
  if [ -z "$CUDART" ]; then
    log "skip CUDA shared memory: no libcudart.so* under the pip torch (set PTPERF_CUDART)"
  elif PTPERF_CUDART="$CUDART" "$BUILD/ptperf" -u "127.0.0.1:$PORT" -m "$1" --shared-memory cuda \
      --concurrency 1 -p 200 -r 3 -s 100 -q >"$RAW/cudashm-probe.log" 2>&1; then
    CUDA_SHM=1
    export PTPERF_CUDART="$CUDART"
  else
    log "skip CUDA shared memory, ptperf --shared-memory cuda fails: $(grep -m1 '^ptperf: ' "$RAW/cudashm-probe.log" || tail -1 "$RAW/cudashm-probe.log")"
  fi
}

# Model $1 under the loads of the table: HTTP binary tensors, system and
# CUDA shared memory (concurrency 1..512), gRPC.
served_loads() {
  local m="$1" c=1,2,4,8,16,32,64,128,256,512
  log "ptperf $m, concurrency 1..512"
  ptperf -m "$m" --concurrency "$c" -f "$RAW/ptperf_$m.csv"
  log "ptperf $m with system shared memory, concurrency 1..512"
  ptperf -m "$m" --shared-memory system --concurrency "$c" -f "$RAW/ptperf_${m}_shm.csv"
  if [ -n "$CUDA_SHM" ]; then
    log "ptperf $m with CUDA shared memory, concurrency 1..512"
    ptperf -m "$m" --shared-memory cuda --concurrency "$c" -f "$RAW/ptperf_${m}_cudashm.csv"
  fi
  log "ptperf $m over gRPC, concurrency 1..512"
  ptperf -m "$m" -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" --grpc-channels 4 \
    --concurrency 1,16,64,128,256,512 -f "$RAW/ptperf_${m}_grpc.csv"
}

# Device busy at saturation: nvidia-smi's utilization.gpu (the share of
# each 100 ms in which a kernel ran on GPU 0) sampled while the same load
# runs at concurrency 512 again; the first half second (ramp-up) left out.
busy_probe() {
  local label="$1"; shift
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0 -lms 100 \
    >"$RAW/busy_$label.txt" 2>/dev/null &
  local smi=$!
  ptperf "$@" --concurrency 512 -f "$RAW/busy_$label.csv" || true
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null || true
  awk -F, -v l="$label" 'NR > 5 && $1 ~ /^[0-9]+$/ {s += $1; n++}
    END {if (n) printf "%s,%.1f\n", l, s / n}' "$RAW/busy_$label.txt" >>"$RAW/busy.csv"
}
busy_loads() {
  local m="$1"
  busy_probe "$m" -m "$m"
  busy_probe "${m}_shm" -m "$m" --shared-memory system
  [ -z "$CUDA_SHM" ] || busy_probe "${m}_cudashm" -m "$m" --shared-memory cuda
  busy_probe "${m}_grpc" -m "$m" -i grpc --grpc-url "127.0.0.1:$GRPC_PORT" --grpc-channels 4
}

if [ "$SET" = aoti ]; then
  m=resnet50_fp16_aoti
  log "(a) the reference: PyTorch's aoti_load_package of the same package"
  rm -f "$RAW/torch.csv"
  if "$PY" "$ROOT/bench/gpu/torch_ref.py" "$MODELS/$m/1/model.pt2" FP16 3,224,224 \
      "$m" "$RAW/torch.csv" 1,8,32,128 --seconds "${BENCH_REF_SECONDS:-2}" >>"$RAW/torch.log" 2>&1; then
    echo "aoti_reference=python" >>"$RAW/meta.txt"
    # The package as a CUDA graph, in a process of its own: a capture that
    # crashes it leaves the eager rows above standing (and says so).
    "$PY" "$ROOT/bench/gpu/torch_ref.py" "$MODELS/$m/1/model.pt2" FP16 3,224,224 \
      "$m" "$RAW/torch.csv" 1,8,32,128 --seconds "${BENCH_REF_SECONDS:-2}" --package-graph \
      >>"$RAW/torch.log" 2>&1 || {
      rc=$?
      echo "package-graph: exit $rc" >>"$RAW/torch.log"
      log "PyTorch's CUDA graph of the package failed (exit $rc): the eager reference stands alone"
    }
  else
    # torch 2.11's Python loader crashes in AOTIModelPackageLoader's
    # constructor on the GPU host (docs/gpu.md): the same class from C++,
    # as PyTorch's C++ docs use it, is then the reference.
    rc=$?
    log "aoti_load_package failed (exit $rc): LibTorch's AOTIModelPackageLoader from C++ instead"
    echo "aoti_reference=cxx (python exit $rc)" >>"$RAW/meta.txt"
    rm -f "$RAW/torch.csv"
    "$BUILD/aoti_ref" "$MODELS/$m/1/model.pt2" FP16 3,224,224 "$m" "$RAW/torch.csv" 1,8,32,128 \
      "${BENCH_REF_SECONDS:-2}" >>"$RAW/torch.log" 2>&1
  fi
  log "(b) ptserve, torch_aoti"
  start_server "$MODELS" serve
  probe_cuda_shm "$m"
  served_loads "$m"
  echo "model,busy_pct" >"$RAW/busy.csv"
  log "device busy at concurrency 512 (nvidia-smi)"
  busy_loads "$m"
  stop_server
  log "done: $RAW"
  exit 0
fi

log "(a) the reference: PyTorch itself running the same files (bench/gpu/torch_ref.py)"
rm -f "$RAW/torch.csv"
REF_SECONDS="${BENCH_REF_SECONDS:-2}"
"$PY" "$ROOT/bench/gpu/torch_ref.py" "$MODELS/resnet50_fp32/1/model.pt" FP32 3,224,224 \
  resnet50_fp32 "$RAW/torch.csv" 1,8,32,128,256 --seconds "$REF_SECONDS" >>"$RAW/torch.log"
"$PY" "$ROOT/bench/gpu/torch_ref.py" "$MODELS/resnet50_fp16/1/model.pt" FP16 3,224,224 \
  resnet50_fp16 "$RAW/torch.csv" 1,8,32,128,256 --seconds "$REF_SECONDS" --graph >>"$RAW/torch.log"
"$PY" "$ROOT/bench/gpu/torch_ref.py" "$MODELS/mlp/1/model.pt" FP32 64 \
  mlp "$RAW/torch.csv" 1,8,32,128 --seconds "$REF_SECONDS" --graph >>"$RAW/torch.log"

if [ "${BENCH_SKIP_BRIDGE:-0}" = 1 ]; then
  log "(a') skipped (BENCH_SKIP_BRIDGE=1)"
else
  log "(a') diagnostic: the same files through ptserve's bridge, in process (bench_inproc)"
  echo "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us" >"$RAW/inproc.csv"
  inproc() {
    local label="$1" model="$2"; shift 2
    "$BUILD/bench_inproc" --device cuda:0 --model "$MODELS/$model/1/model.pt" "$@" \
      --label "$label" --seconds 2 --warmup 50 --csv "$RAW/inproc.csv" >>"$RAW/inproc.log"
  }
  for b in 1 8 32 128; do
    inproc "resnet50_fp32/b$b" resnet50_fp32 --input "FP32:$b,3,224,224"
    inproc "resnet50_fp16/b$b" resnet50_fp16 --input "FP16:$b,3,224,224"
    inproc "mlp/b$b" mlp --input "FP32:$b,64"
  done
  inproc "resnet50_fp16_graph/b1" resnet50_fp16 --input "FP16:1,3,224,224" --graph
  inproc "mlp_graph/b1" mlp --input "FP32:1,64" --graph
fi

log "(b, c) ptserve over HTTP"
start_server "$MODELS" serve
log "ptperf mlp, concurrency 1..512"
ptperf -m mlp --concurrency 1,2,4,8,16,32,64,128,256,512 -f "$RAW/ptperf_mlp.csv"
probe_cuda_shm mlp
for m in resnet50_fp32 resnet50_fp16; do
  served_loads "$m"
done
echo "model,busy_pct" >"$RAW/busy.csv"
log "device busy at concurrency 512 (nvidia-smi)"
for m in resnet50_fp32 resnet50_fp16; do
  busy_loads "$m"
done
log "ptperf resnet50_fp16_graph, concurrency 1: binary tensors, system and CUDA shared memory"
ptperf -m resnet50_fp16_graph --concurrency 1 -f "$RAW/ptperf_resnet50_fp16_graph.csv"
ptperf -m resnet50_fp16_graph --concurrency 1 --shared-memory system \
  -f "$RAW/ptperf_resnet50_fp16_graph_shm.csv"
[ -z "$CUDA_SHM" ] || ptperf -m resnet50_fp16_graph --concurrency 1 --shared-memory cuda \
  -f "$RAW/ptperf_resnet50_fp16_graph_cudashm.csv"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv >"$RAW/nvidia-smi.txt" || true
stop_server

if [ "${BENCH_SKIP_FIRST:-0}" = 1 ]; then
  log "(d) skipped (BENCH_SKIP_FIRST=1)"
else
  log "(d) first request with and without warmup"
  echo "model,warmup,ready_ms,first_request_ms,second_request_ms" >"$RAW/first_request.csv"
  for w in no yes; do
    dir="$MODELS-first-$w"
    rm -rf "$dir"; mkdir -p "$dir"; cp -r "$MODELS/resnet50_fp16" "$dir/"
    if [ "$w" = yes ]; then
      cat >>"$dir/resnet50_fp16/config.pbtxt" <<'PBTXT'
model_warmup [ { name: "w" batch_size: 1 count: 3 inputs { key: "INPUT__0" value: { data_type: TYPE_FP16 dims: [ 3, 224, 224 ] random_data: true } } } ]
PBTXT
    fi
    t0=$(date +%s%N)
    start_server "$dir" "first-$w"
    t1=$(date +%s%N)
    "$PY" "$ROOT/bench/gpu/first_request.py" "127.0.0.1:$PORT" resnet50_fp16 "$w" $(((t1 - t0) / 1000000)) \
      >>"$RAW/first_request.csv"
    stop_server
  done
fi
log "done: $RAW"
