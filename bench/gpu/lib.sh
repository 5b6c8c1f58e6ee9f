# bench/gpu/lib.sh — what the GPU benchmarks share, sourced after
# bench/lib.sh. They set ROOT, RAW, BUILD, PY and INTERVAL_MS first;
# start_server sets PORT, GRPC_PORT and SERVER_PID.

# What the run ran on, as key=value lines in $RAW/meta.txt (the reports
# read them): date, commit, GPU, host CPU and cores, torch, window length.
# BENCH_GIT names the commit where the tree's own .git may not be its
# (a copy of the tree sent to a GPU host: one such copy kept the .git of
# an earlier commit, and a run recorded that commit).
gpu_meta() {
  {
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git=${BENCH_GIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "cores=$(nproc)"
    echo "torch=$("$PY" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
    echo "interval_ms=$INTERVAL_MS"
    echo "build=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null) ($BUILD)"
  } >"$RAW/meta.txt"
}

# ptserve, ptperf and bench_inproc (Release) in $BUILD against the host's
# pip torch. BENCH_PREBUILT=1 uses what $BUILD already has (a short device
# call that built it for the tests, e.g. tests/gpu/run.sh's build-gpu).
gpu_build() {
  if [ "${BENCH_PREBUILT:-0}" = 1 ]; then
    log "using the build in $BUILD as it is (BENCH_PREBUILT=1)"
    return
  fi
  log "build (Release) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" >/dev/null
  cmake --build "$BUILD" --target ptserve ptperf bench_inproc $([ "${BENCH_SET:-}" = aoti ] && echo aoti_ref) -j"$(nproc)" >/dev/null
}

# ptperf --shared-memory cuda loads the CUDA runtime at run time
# ($PTPERF_CUDART). The host's runtime comes with the pip torch: under
# site-packages/nvidia (cuda_runtime/lib/libcudart.so.12 in CUDA 12 wheels,
# cu13/lib/libcudart.so.13 in CUDA 13 ones) or torch/lib. The one of
# torch's CUDA major version first.
find_cudart() {
  if [ -n "${PTPERF_CUDART:-}" ]; then echo "$PTPERF_CUDART"; return; fi
  "$PY" - <<'PY' 2>/dev/null || true
import glob, os
dirs, major = [], ""
try:
    import nvidia  # a namespace package: site-packages/nvidia
    dirs += list(nvidia.__path__)
except ImportError:
    pass
try:
    import torch
    dirs.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
    major = (torch.version.cuda or "").split(".")[0]
except ImportError:
    pass
found = sorted({f for d in dirs
                for f in glob.glob(os.path.join(d, "**", "libcudart.so*"), recursive=True)})
found.sort(key=lambda f: not f.endswith(".so." + major))
print(found[0] if found else "")
PY
}

# ptserve on the repository $1, its log in $RAW/server-$2.log; the
# caller's environment (PTSERVE_CUDA_WAIT=...) passes on to it.
start_server() {
  PORT="$(free_port)"
  GRPC_PORT="$(free_port)"
  "$BUILD/ptserve" --model-repository "$1" --http-port "$PORT" --http-address 127.0.0.1 \
    --grpc-port "$GRPC_PORT" --metrics-port "$(free_port)" --http-thread-count 16 \
    --allow-client-shm=true \
    >"$RAW/server-$2.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RAW/server-$2.log" >&2; return 1; }
    sleep 0.1
  done
  return 1
}

# ptperf against the server of start_server; exit status 2 (not stable)
# is a result too.
ptperf() {
  local rc=0
  "$BUILD/ptperf" -u "127.0.0.1:$PORT" -p "$INTERVAL_MS" -r "${BENCH_MAX_TRIALS:-10}" -q \
    --server-pid "$SERVER_PID" "$@" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]
}
