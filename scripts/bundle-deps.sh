#!/usr/bin/env bash
# Bundles the .deb packages of ptserve's C dependencies into .bundle/debs so
# that ptserve can be built on an offline GPU host (e.g. Ubuntu 24.04 with a
# pip torch) that lacks jansson, protobuf-c and friends; and the wheels of
# the tests' Python packages (tritonclient, hyper-h2, ...) into
# .bundle/wheels and NVIDIA's perf_analyzer into .bundle/perf_analyzer for
# the GPU suite (below).
#
# Run here (Debian 12, network to the package mirror), carry .bundle to the
# offline host, and there: `source scripts/use-bundle.sh` before cmake.
# The packages are Debian 12's; they need glibc >= 2.36, which Ubuntu 24.04
# (2.39) satisfies. LibTorch is not bundled: the GPU host's pip torch is used.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.bundle/debs
mkdir -p "$out"
pkgs=(
  libevent-dev libevent-2.1-7 libevent-core-2.1-7 libevent-extra-2.1-7
  libevent-pthreads-2.1-7 libevent-openssl-2.1-7
  libjansson-dev libjansson4
  libhttp-parser-dev libhttp-parser2.9
  libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32
  zlib1g-dev libcmocka-dev libcmocka0
  libjemalloc-dev libjemalloc2
  libnghttp2-dev libnghttp2-14
  pkgconf pkgconf-bin libpkgconf3
  # gRPC core (the gRPC frontend) and what its pkg-config file requires.
  # libssl3 itself is left out: every host has it, and a second copy on the
  # loader path would shadow the system's for unrelated programs.
  libgrpc-dev libgrpc29 libabsl-dev libabsl20220623 libc-ares-dev libc-ares2
  libre2-9 libre2-dev libssl-dev
  libb64-0d  # perf_analyzer's one library beside the CUDA runtime (below)
)
(cd "$out" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
missing=0
for p in "${pkgs[@]}"; do
  ls "$out/${p}_"*.deb >/dev/null 2>&1 || { echo "bundle-deps: failed to download $p" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "bundle-deps: $(ls "$out" | wc -l) packages in $out ($(du -sh "$out" | cut -f1))"

# The Python packages of the tests that a GPU host's torch environment
# lacks, as wheels for that host's Python (GPU_PYTHON, 3.12 by default: the
# H200 hosts'), into .bundle/wheels; tests/gpu/run.sh installs the ones its
# interpreter does not have into .bundle/py. They are
# - tritonclient with its http and grpc extras (gevent, rapidjson, aiohttp,
#   grpcio and what they need), at requirements.txt's pins:
#   tests/gpu/test_shm_cuda.py makes its CUDA regions with
#   tritonclient.utils.cuda_shared_memory, and the CPU end-to-end suite,
#   which run.sh runs against the CUDA build, drives the server with
#   NVIDIA's clients, and grpcio-tools makes its gRPC stubs (test_grpc.py);
# - hyper-h2 and its two parts, with which that suite speaks raw HTTP/2
#   (tests/e2e/h2_util.py); requests and prometheus-client.
# What every such host has beside its pip torch (numpy, ml_dtypes,
# typing_extensions) is left out: 20 MB of numpy in every carry.
wheels=.bundle/wheels
rm -rf "$wheels" && mkdir -p "$wheels"
pins=()
for name in tritonclient grpcio grpcio-tools protobuf h2 hpack hyperframe requests prometheus-client; do
  pins+=("$(grep -o "^$name\(\[[a-z]*\]\)\?==[0-9.]*" requirements.txt | sed 's/\[all\]/[http,grpc]/')")
done
"${PYTHON:-.venv/bin/python}" -m pip download -q --only-binary=:all: \
  --python-version "${GPU_PYTHON:-3.12}" --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  "${pins[@]}" -d "$wheels" 2>&1 | grep -v "is ignored: it is neither a file" || true
rm -f "$wheels"/numpy-* "$wheels"/ml_dtypes-* "$wheels"/typing_extensions-*
for p in "${pins[@]}"; do
  f=$(echo "${p%%[*}" | tr - _)
  ls "$wheels/${f%%==*}-${p##*==}-"*.whl >/dev/null 2>&1 ||
    { echo "bundle-deps: failed to download $p" >&2; exit 1; }
done
echo "bundle-deps: $(ls "$wheels" | wc -l) wheels in $wheels ($(du -sh "$wheels" | cut -f1))"

# perf_analyzer as scripts/setup.sh takes it: the binary inside the
# tritonclient wheel that setup.sh pins (PERF_ANALYZER_WHEEL), with the
# CUDA 12 runtime it links (a GPU host's torch may bring another CUDA's)
# and libb64 (a .deb above). tests/gpu/run.sh unpacks it for
# tests/e2e/test_perf_analyzer.py and tests/gpu/test_perf_analyzer_gpu.py.
pa=.bundle/perf_analyzer
rm -rf "$pa" && mkdir -p "$pa/lib"
pa_pin=$(sed -n 's/^PERF_ANALYZER_WHEEL=//p' scripts/setup.sh)
cudart_pin=$(grep -o "^nvidia-cuda-runtime-cu12==[0-9.]*" requirements.txt)
"${PYTHON:-.venv/bin/python}" -m pip download -q --no-deps --only-binary=:all: \
  --platform manylinux1_x86_64 --platform manylinux2014_x86_64 "$pa_pin" "$cudart_pin" \
  -d "$pa" 2>&1 | grep -v "is ignored: it is neither a file" || true
"${PYTHON:-.venv/bin/python}" - "$pa" <<'PY'
import glob, os, sys, zipfile
pa = sys.argv[1]
wheel = glob.glob(os.path.join(pa, "nvidia_cuda_runtime_cu12-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:  # the shared library only, not the static ones
    with open(os.path.join(pa, "lib", "libcudart.so.12"), "wb") as f:
        f.write(z.read("nvidia/cuda_runtime/lib/libcudart.so.12"))
os.remove(wheel)
PY
ls "$pa"/tritonclient-*.whl >/dev/null || { echo "bundle-deps: failed to download $pa_pin" >&2; exit 1; }
echo "bundle-deps: perf_analyzer ($pa_pin) in $pa ($(du -sh "$pa" | cut -f1))"
