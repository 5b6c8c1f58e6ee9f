#!/usr/bin/env bash
# Installs what ptserve needs to build and test, and nothing else.
#
# 1. System packages: the C toolchain and libraries.
#    Debian/Ubuntu: each package is checked with dpkg-query; only the missing
#    ones are installed (apt-get, through sudo when not root). The package
#    lists are refreshed only when an install fails or there are none yet.
#    macOS: Homebrew equivalents (brew skips what is already installed).
# 2. The project venv ($PTS_VENV, default .venv): the pinned Python packages
#    of requirements.txt — torch, whose bundled LibTorch ptserve links;
#    pytest; NVIDIA's tritonclient — and NVIDIA's perf_analyzer.
#
# Idempotent and silent when everything is present, so `make run` and
# `make test` can call it every time.
#
# PTS_SETUP_ONLY=build installs only what building ptserve needs: the build
# packages, and a venv with torch alone (deploy/Containerfile's build stage,
# where tests never run). PTS_TORCH_PIP_ARGS are pip options for that torch
# (an --index-url or --find-links where the wheel comes from).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${PTS_VENV:-$ROOT/.venv}

# What building ptserve (and its runtime tree, scripts/rootfs.sh) needs.
DEB_BUILD_PACKAGES=(
  build-essential cmake pkg-config
  libevent-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
  libhttp-parser-dev    # HTTP/1.1 request parsing (src/frontend/http/conn.c)
  libjemalloc-dev       # the server's malloc (CMakeLists.txt: PTS_JEMALLOC)
  # gRPC core: ptperf's gRPC client (tools/ptperf); the server serves gRPC on
  # nghttp2. protoc and its gRPC plugin: the tests' Python stubs.
  libgrpc-dev protobuf-compiler protobuf-compiler-grpc
  libnghttp2-dev        # HTTP/2 of the gRPC frontend (src/frontend/grpc/h2.c)
  libssl-dev            # TLS on the gRPC port (src/net/tls.c, --grpc-use-ssl)
  python3 python3-venv  # the project venv; LibTorch comes from its pip torch
  busybox-static binutils  # scripts/rootfs.sh: the image's busybox, strip
)
# What the tests, benchmarks and deployment checks need besides.
DEB_TEST_PACKAGES=(
  libcmocka-dev         # the unit tests
  libb64-0d             # the one shared library of perf_analyzer not in the venv
  curl
  gdb                   # the e2e tests' report of a hang: every thread's stack
  openssl               # tests/e2e/test_grpc_tls.py makes its CA and certificates
  clang libclang-rt-dev  # the fuzz drivers: clang and its libFuzzer runtime
  # tests/deploy: the rolling restart behind HAProxy in network namespaces
  # (iproute2), the systemd unit check (systemd-analyze), and the container
  # image (scripts/image.sh: a Debian base from debootstrap, built and run
  # by buildah without a daemon)
  haproxy iproute2 util-linux systemd debootstrap buildah
)
if [ "${PTS_SETUP_ONLY:-}" = build ]; then
  DEB_PACKAGES=("${DEB_BUILD_PACKAGES[@]}")
else
  DEB_PACKAGES=("${DEB_BUILD_PACKAGES[@]}" "${DEB_TEST_PACKAGES[@]}")
fi

BREW_PACKAGES=(cmake pkg-config libevent http-parser jansson protobuf-c grpc libnghttp2 openssl@3 jemalloc cmocka python@3.11)

# A package counts as present only when dpkg says "installed" (a removed
# package whose config files remain is listed by dpkg-query -W too).
deb_missing() {
  local p
  for p in "$@"; do
    if [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | cut -c1-2)" != "ii" ]; then
      echo "$p"
    fi
  done
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "setup.sh: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

apt_lists_empty() {
  ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null
}

setup_debian() {
  local missing
  mapfile -t missing < <(deb_missing "${DEB_PACKAGES[@]}")
  [ "${#missing[@]}" -eq 0 ] && return 0

  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if apt_lists_empty; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  fi
  if ! as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    # Stale lists name package versions the mirror no longer has.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

setup_macos() {
  if ! command -v brew >/dev/null 2>&1; then
    echo "setup.sh: Homebrew is required on macOS (https://brew.sh)" >&2
    return 1
  fi
  local missing=() p
  for p in "${BREW_PACKAGES[@]}"; do
    brew list --versions "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "setup.sh: installing ${missing[*]}"
  brew install "${missing[@]}"
}

# ---- the project venv ----

# perf_analyzer is NVIDIA's C++ load generator. PyPI ships it inside the
# tritonclient wheels up to 2.60, and as perf-analyzer from 2.58; every build
# from 2.52 on needs glibc 2.38, newer than Debian 12's 2.36. The
# tritonclient 2.51.0 wheel (Triton r24.10) carries the newest binary that
# runs here. It is taken out of that wheel unchanged, with a wrapper that
# points it at the pip CUDA runtime it links (it runs without a GPU). The
# Python client library stays the current tritonclient of requirements.txt.
PERF_ANALYZER_WHEEL=tritonclient==2.51.0

venv_base_python() {
  if [ -n "${PTS_BASE_PYTHON:-}" ]; then
    echo "$PTS_BASE_PYTHON"
  elif [ "$(uname -s)" = Darwin ]; then
    echo "$(brew --prefix python@3.11)/bin/python3.11"
  else
    echo /usr/bin/python3 # Debian's 3.11: the torch wheel on the build machines' disk is cp311
  fi
}

# The build machines' pip lists local mirrors that may not exist; its
# warnings about those are noise.
quiet_pip() {
  "$VENV/bin/python" -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2)
}

setup_perf_analyzer() {
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || return 0
  local wheels="$VENV/.wheels" cudart
  mkdir -p "$wheels"
  quiet_pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "$PERF_ANALYZER_WHEEL"
  cudart=$("$VENV/bin/python" -c \
    'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
  "$ROOT/scripts/perf-analyzer-from-wheel.sh" "$VENV/bin/python" \
    "$(ls "$wheels"/tritonclient-"${PERF_ANALYZER_WHEEL#tritonclient==}"-*.whl | tail -1)" \
    "$VENV/libexec/perf_analyzer" "$VENV/bin/perf_analyzer" "$cudart"
  "$VENV/bin/perf_analyzer" --version >/dev/null
}

# The build-only venv: torch alone, at requirements.txt's pin.
setup_venv_build() {
  [ -x "$VENV/bin/python" ] || "$(venv_base_python)" -m venv "$VENV"
  # shellcheck disable=SC2086 # the pip options are words
  quiet_pip install --quiet ${PTS_TORCH_PIP_ARGS:-} "$(grep -E '^torch==' "$ROOT/requirements.txt")"
}

# Reinstalled only when requirements.txt or the perf_analyzer pin changed
# since the last install that finished: the venv keeps a stamp of both.
setup_venv() {
  local want stamp="$VENV/.ptserve-requirements"
  want=$(cat "$ROOT/requirements.txt" <(echo "$PERF_ANALYZER_WHEEL") | cksum)
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "setup.sh: installing requirements.txt into $VENV"
  [ -x "$VENV/bin/python" ] || "$(venv_base_python)" -m venv "$VENV"
  quiet_pip install --quiet -r "$ROOT/requirements.txt"
  setup_perf_analyzer
  echo "$want" > "$stamp"
}

case "$(uname -s)" in
  Linux)
    if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
      setup_debian
    else
      echo "setup.sh: only Debian/Ubuntu (apt) are automated; install the equivalents of:" >&2
      echo "  ${DEB_PACKAGES[*]}" >&2
      exit 1
    fi
    ;;
  Darwin)
    setup_macos
    ;;
  *)
    echo "setup.sh: unsupported system $(uname -s)" >&2
    exit 1
    ;;
esac
if [ "${PTS_SKIP_VENV:-0}" = 1 ]; then
  :
elif [ "${PTS_SETUP_ONLY:-}" = build ]; then
  setup_venv_build
else
  setup_venv
fi
