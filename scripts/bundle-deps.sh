#!/usr/bin/env bash
# Bundles the .deb packages of ptserve's C dependencies into .bundle/debs so
# that ptserve can be built on an offline GPU host (e.g. Ubuntu 24.04 with a
# pip torch) that lacks jansson, protobuf-c and friends; and the wheels of
# tritonclient and hyper-h2 into .bundle/wheels for the GPU suite (below).
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
)
(cd "$out" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
missing=0
for p in "${pkgs[@]}"; do
  ls "$out/${p}_"*.deb >/dev/null 2>&1 || { echo "bundle-deps: failed to download $p" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "bundle-deps: $(ls "$out" | wc -l) packages in $out ($(du -sh "$out" | cut -f1))"

# tritonclient's wheel (pure Python, without its dependencies), at the
# version requirements.txt pins: tests/gpu/test_shm_cuda.py makes its CUDA
# regions with tritonclient.utils.cuda_shared_memory, and GPU hosts carry
# torch, numpy, ml_dtypes and cuda-bindings but not tritonclient.
# tests/gpu/run.sh installs it from here into .bundle/py when it is missing.
wheels=.bundle/wheels
mkdir -p "$wheels"
# hyper-h2 and its two parts (pure Python too) go with it: the CPU
# end-to-end suite that run.sh runs against the CUDA build speaks raw
# HTTP/2 through them (tests/e2e/h2_util.py).
for name in tritonclient h2 hpack hyperframe; do
  pin=$(grep -o "^$name[^=]*==[0-9.]*" requirements.txt | sed 's/\[.*\]//')
  "${PYTHON:-.venv/bin/python}" -m pip download --no-deps -q "$pin" -d "$wheels"
done
echo "bundle-deps: $(ls "$wheels")"
